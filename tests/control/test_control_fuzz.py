"""A bounded fuzz of the control protocol against a live server (over a fake session):
random bytes, random JSON, mutated valid messages and known-hostile shapes, over several
connections, some left mid-line. Every line gets exactly one well-formed reply, nothing
reaches the server's last-resort handler, and afterwards a well-formed client is served
as if nothing had happened. The seed is fixed, so a failure reproduces."""

from __future__ import annotations

import json
import random
import time

from rltui.control.protocol import MAX_LINE_BYTES
from rltui.session import Pause, SessionState, Stop

from control_client import LineClient, served, wait_for

SEED = 20240621
CONNECTIONS = 24
LINES_PER_CONNECTION = 150

VALID = [
    {"type": "command", "command": "pause"},
    {"type": "command", "command": "resume"},
    {"type": "command", "command": "save"},
    {"type": "command", "command": "rollback"},
    {"type": "command", "command": "set_hparams", "changes": {"lr": 1e-3}},
    {"type": "command", "command": "set_hparams", "changes": {"gamma": 0.98, "ent_coef": 0.01}},
    {"type": "hello", "protocol": 1},
]
KEYS = ["type", "command", "changes", "id", "protocol", "lr", "gamma", "clip_eps", "hello", "set_hparams", "stop"]


def hostile() -> list[bytes]:
    """Shapes that took down or strained earlier servers, and their neighbours."""
    deep = 30_000
    return [
        b'{"type":"command","command":"set_hparams","changes":{"lr":1' + b"0" * 400 + b"}}",
        b'{"type":"command","command":"set_hparams","changes":{"lr":-1' + b"0" * 4000 + b"}}",
        b'{"type":"command","command":"set_hparams","changes":{"lr":1' + b"0" * 5000 + b"}}",
        b'{"type":"command","command":"set_hparams","changes":{"lr":1e99999}}',
        b'{"type":"command","command":"set_hparams","changes":{"lr":NaN,"gamma":Infinity}}',
        b'{"type":"command","id":' + b"[" * deep + b"]" * deep + b',"command":"pause"}',
        b'{"type":"command","id":' + b'{"a":' * 9000 + b"1" + b"}" * 9000 + b"}",
        b"[" * 60_000,
        b'{"type":"command","command":"set_hparams","changes":' + b"[" * 900 + b"]" * 900 + b"}",
        b'{"type":"hello","protocol":' + b"[" * 900 + b"]" * 900 + b"}",
        b'{"type":"command","command":"set_hparams","changes":{'
        + b",".join(b'"k%d":%d' % (i, i) for i in range(5000)) + b"}}",
        b'{"type":"command","command":"\\ud800"}',
        b'{"type":"\\u0000","id":"\\udfff"}',
        b'{"type":"command","command":"pause","id":' + b"9" * 4300 + b"}",
        b'{"type":"command","command":"pause","id":1e400}',
        b'{"type":"command","command":"pause","id":true}',
        b'{"type":"command","command":"pause","type":"hello"}',
        b"\xc3\x28\xa0\xa1\xff",
        b"\x00" * 100,
        b'"' + b"a" * 60_000 + b'"',
        b"{" + b'"a":1,' * 8000 + b'"type":"command"}',
    ]


def random_json(rng: random.Random, depth: int = 0):
    choice = rng.randrange(10 if depth < 5 else 7)
    if choice == 0:
        return None
    if choice == 1:
        return rng.choice([True, False])
    if choice == 2:
        return rng.choice([0, -1, 1, 2**63, -(2**200), rng.randint(-10**6, 10**6)])
    if choice == 3:
        return rng.choice([0.0, -0.0, 1e-300, 1e300, rng.uniform(-1e6, 1e6)])
    if choice in (4, 5, 6):
        if rng.random() < 0.5:
            return rng.choice(KEYS)
        return "".join(chr(rng.randrange(0x20, 0x3000)) for _ in range(rng.choice([0, 1, 5, 300])))
    if choice in (7, 8):
        return {rng.choice(KEYS): random_json(rng, depth + 1) for _ in range(rng.randrange(5))}
    return [random_json(rng, depth + 1) for _ in range(rng.randrange(5))]


def mutate(rng: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randrange(1, 4)):
        position = rng.randrange(len(out) + 1)
        action = rng.randrange(3)
        if action == 0 and out:
            del out[min(position, len(out) - 1)]
        elif action == 1:
            out[position:position] = bytes([rng.randrange(256)])
        elif out:
            out[min(position, len(out) - 1)] = rng.choice(b'{}[]",:0123456789-+.eE \\tnul')
    return bytes(out)


def random_line(rng: random.Random, extra: list[bytes]) -> bytes:
    kind = rng.randrange(6)
    if kind == 0:
        line = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200)))
    elif kind == 1:
        line = json.dumps(random_json(rng)).encode()
    elif kind == 2:
        message = {"type": rng.choice(["command", "hello", "dance"])} if rng.random() < 0.8 else {}
        message.update({k: random_json(rng, 3) for k in rng.sample(KEYS, rng.randrange(4))})
        line = json.dumps(message).encode()
    elif kind == 3:
        line = mutate(rng, json.dumps({**rng.choice(VALID), "id": rng.randrange(100)}).encode())
    elif kind == 4:
        line = json.dumps({**rng.choice(VALID), "id": rng.choice([None, "a", 3, 2.5])}).encode()
    else:
        line = rng.choice(extra)
    line = line.replace(b"\n", b" ")
    return _without_stop(line)[:MAX_LINE_BYTES]


def _without_stop(line: bytes) -> bytes:
    """A fuzzer that stops the run tests nothing after it: a line that would is left out."""
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return line
    if isinstance(message, dict) and message.get("type") == "command" and message.get("command") == "stop":
        return b'{"type":"command","command":"pause"}'
    return line


def answer_all(client: LineClient, lines: list[bytes]) -> None:
    """Send `lines` at once; each non-blank one is answered exactly once, well-formed."""
    client.send(b"".join(line + b"\n" for line in lines))
    expected = sum(1 for line in lines if line.strip())
    replies = []
    while len(replies) < expected:
        message = client.recv()
        assert message is not None, f"closed after {len(replies)} of {expected} replies"
        assert isinstance(message, dict) and isinstance(message.get("type"), str)
        if message["type"] in ("ok", "error"):
            replies.append(message)
    for reply in replies:
        assert set(reply) <= {"type", "id", "error", "command", "protocol"}, reply
        if reply["type"] == "error":
            assert isinstance(reply["error"], str) and "\n" not in reply["error"] and len(reply["error"]) < 1000


def test_fuzzed_messages_never_take_the_server_down(tmp_path):
    rng = random.Random(SEED)
    extra = hostile()
    started = time.monotonic()
    with served(tmp_path) as (fake, server):
        fake.on_thread(fake.advance, 30)
        sent = 0  # lines, over all connections
        for connection in range(CONNECTIONS):
            client = LineClient(server.path)
            assert client.recv()["type"] == "hello"
            lines = [extra[connection]] if connection < len(extra) else []
            lines += [random_line(rng, extra) for _ in range(LINES_PER_CONNECTION)]
            start = 0
            while start < len(lines):  # batches of up to 80 lines in one send
                size = rng.randrange(1, 81)
                answer_all(client, lines[start:start + size])
                start += size
            sent += len(lines)
            if connection % 3 == 0:  # leave in the middle of a line
                client.send(random_line(rng, extra)[:50])
            client.close()
        for line in extra[CONNECTIONS:]:  # the rest of the hostile shapes, one connection each
            client = LineClient(server.path)
            answer_all(client, [line])
            client.close()
        wait_for(lambda: server.client_count == 0)

        # The server is whole: no unforeseen failure, its socket in place, and a
        # well-formed client is served as usual.
        assert server.last_internal_error is None, server.last_internal_error
        assert server._thread.is_alive() and server.path.exists()
        assert not fake.commands_of(Stop)
        time.sleep(0.2)  # the fuzz may have spent the command allowance
        client = LineClient(server.path)
        hello = client.recv()
        assert hello["type"] == "hello" and hello["state"] in ("running", "paused")
        client.send({"type": "hello", "protocol": 1, "id": "check"})
        assert client.reply() == {"type": "ok", "id": "check", "protocol": 1}
        client.send({"type": "command", "command": "set_hparams", "changes": {"lr": 0.000321}, "id": 1})
        assert client.reply() == {"type": "ok", "id": 1, "command": "set_hparams"}
        edit = client.until(lambda m: m["type"] == "event" and m["kind"] == "hparams"
                            and m["data"]["changes"].get("lr") == 0.000321)
        assert edit["data"]["changes"] == {"lr": 0.000321}
        client.skipped.clear()
        fake.on_thread(fake.advance, 1)
        live = client.until(lambda m: m["type"] == "snapshot")
        assert [r["update"] for r in live["records"]] == [live["update"]]
        client.close()
        assert fake.state in (SessionState.RUNNING, SessionState.PAUSED)
    assert sent >= CONNECTIONS * LINES_PER_CONNECTION
    assert time.monotonic() - started < 60


def oversize_line(rng: random.Random, size: int) -> bytes:
    """A line of `size` bytes that would be applied if its length were not checked: a
    valid command padded with whitespace, or a set_hparams with a long field it ignores."""
    if rng.random() < 0.5:
        head = b'{"type": "command", "command": "pause"'
        return head + b" " * (size - len(head) - 1) + b"}"
    head = b'{"type": "command", "command": "set_hparams", "changes": {"lr": 0.000123}, "pad": "'
    return head + b"x" * (size - len(head) - 2) + b'"}'


def test_lines_over_the_limit_are_refused_and_change_nothing(tmp_path):
    # The band just over the limit, up to a few socket reads' worth: each line gets the
    # refusal and its connection closes, whether it arrives in one piece or many.
    rng = random.Random(SEED)
    sizes = [MAX_LINE_BYTES + 1, MAX_LINE_BYTES + 2, 2 * MAX_LINE_BYTES, 200 * 1024]
    sizes += [rng.randrange(MAX_LINE_BYTES + 1, 200 * 1024) for _ in range(8)]
    with served(tmp_path) as (fake, server):
        for size in sizes:
            line = oversize_line(rng, size)
            assert len(line) == size
            client = LineClient(server.path)
            assert client.recv()["type"] == "hello"
            data = line + b"\n"
            cuts = sorted(rng.sample(range(1, len(data)), 3)) if rng.random() < 0.5 else []
            try:  # at once, or in pieces with the end arriving last
                for start, end in zip([0, *cuts], [*cuts, len(data)], strict=True):
                    client.send(data[start:end])
            except (BrokenPipeError, ConnectionResetError):
                pass  # refused before the whole line was sent: the refusal is there to read
            reply = client.reply()
            assert reply["type"] == "error" and "longer than" in reply["error"], (size, reply)
            try:  # then the end of the stream
                while (message := client.recv()) is not None:
                    assert message["type"] not in ("ok", "error"), (size, message)
            except ConnectionResetError:
                pass  # closed with the rest of the line unread, the stream ends in a reset
            client.close()
        # A line of exactly the limit is still answered, and only it was applied.
        client = LineClient(server.path)
        assert client.recv()["type"] == "hello"
        client.send(oversize_line(random.Random(1), MAX_LINE_BYTES) + b"\n")
        assert client.reply()["type"] == "ok"
        client.close()
        wait_for(lambda: server.client_count == 0)
        assert server.last_internal_error is None
        assert [type(command) for command in fake.commands] == [Pause]
