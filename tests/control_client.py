"""A raw line client of the control socket for tests, and a served fake session."""

from __future__ import annotations

import contextlib
import json
import socket
import time
from pathlib import Path

from rltui.control.remote import connect_retrying
from rltui.control.server import ControlServer

from fakes import FakeSession

TIMEOUT = 10.0


class LineClient:
    """Speaks the protocol by hand: what a script or another tool would do."""

    def __init__(self, path: Path, timeout: float = TIMEOUT):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        connect_retrying(self.sock, path, timeout)  # as rltui's own client does
        self.file = self.sock.makefile("rb")
        self.skipped: list[dict] = []

    def send(self, message) -> None:
        data = message if isinstance(message, bytes) else (json.dumps(message) + "\n").encode()
        self.sock.sendall(data)

    def recv(self) -> dict | None:
        """The next message; None at end of stream."""
        line = self.file.readline()
        return json.loads(line) if line else None

    def until(self, predicate, limit: int = 1000) -> dict:
        """The first message, skipped earlier or read now, that satisfies `predicate`.
        Messages passed over are kept for later calls (the server interleaves replies
        with live events)."""
        for index, message in enumerate(self.skipped):
            if predicate(message):
                return self.skipped.pop(index)
        for _ in range(limit):
            message = self.recv()
            assert message is not None, "the server closed the connection"
            if predicate(message):
                return message
            self.skipped.append(message)
        raise AssertionError("no such message")

    def reply(self) -> dict:
        return self.until(lambda m: m["type"] in ("ok", "error"))

    def close(self) -> None:
        self.file.close()
        self.sock.close()


@contextlib.contextmanager
def served(run_dir: Path, *, start: bool = True, **server_kwargs):
    """A started FakeSession behind a ControlServer; closes both."""
    fake = FakeSession(total_updates=100)
    server = ControlServer(fake, run_dir, config={"env": "CartPole-v1", "num_envs": 4}, **server_kwargs)
    server.start()
    if start:
        fake.start()
        probe = LineClient(server.path)  # once it sees RUNNING, so will every later client
        probe.until(lambda m: m.get("state") == "running")
        probe.close()
    try:
        yield fake, server
    finally:
        if fake.started:
            fake.stop()
            fake.join(TIMEOUT)
        server.close()


def wait_for(predicate, timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)
