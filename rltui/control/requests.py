"""The control server's answers to its clients (`ClientRequests`, which the server holds):
each line a client sends is checked as data (`protocol.parse_request`) and gets one reply;
commands go to the session, checked and rate-limited, and a parameters request is
answered a piece at a time once the session has copied them.

Everything here runs on the server thread, but for the callback of the session's copy of
the parameters, which only posts it back to the server thread.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rltui.control import params_transfer, protocol
from rltui.control.allowance import Allowance
from rltui.control.clients import Client, ConnectedClients, OwedParams
from rltui.control.feed import RunFeed
from rltui.control.protocol import ProtocolError
from rltui.session.boundary_commands import validate_changes
from rltui.session.command_json import command_name
from rltui.session.commands import CloneMember, Command, FreezeMembers, SetHParams
from rltui.session.interface import SessionClient
from trainers.hparams import HParamError

# Whole lines answered for one client per turn of the loop: small turns keep the CPU
# budget fine-grained and let every client have its turn.
LINES_PER_TURN = 32
# Distinct parameter blobs being sent at once (clients reading an older copy slowly keep it).
MAX_PARAMS_IN_FLIGHT = 4 * params_transfer.MAX_PARAMS_BYTES
PARAMS_PER_SECOND = 2.0  # parameters requests taken, all clients together
PARAMS_BURST = 4


class ClientRequests:
    """The replies to what clients send, and the commands and parameters requests they
    pass to the session, each kind within its allowance (all clients together)."""

    def __init__(
        self,
        session: SessionClient,
        clients: ConnectedClients,
        feed: RunFeed,
        *,
        post: Callable[[str, Any], None],
        on_internal_error: Callable[[Exception], None],
        commands_per_second: float,
        command_burst: int,
    ):
        self._session = session
        self._clients = clients
        self._feed = feed  # the run's state and latest snapshot, which some commands are checked against
        self._command_tokens = Allowance(commands_per_second, command_burst)
        self._params_tokens = Allowance(PARAMS_PER_SECOND, PARAMS_BURST)
        # Hands an item to the server thread from any thread: a copy of the parameters
        # comes back through it as ("params", (client, request_id, future)).
        self._post = post
        self._on_internal_error = on_internal_error
        self._params_encoded: tuple[Any, list[str], int] | None = None  # (snapshot, pieces, bytes)

    def answer_lines(self, client: Client) -> None:
        """Answer the whole lines it has sent, up to LINES_PER_TURN; more wait their turn.
        A line is looked for only within the limit's length: one longer is refused whether
        its end has arrived yet or not."""
        self._clients.lines_waiting.discard(client)
        for _ in range(LINES_PER_TURN):
            end = client.inbox.find(b"\n", 0, protocol.MAX_LINE_BYTES + 1)
            if end < 0 or client not in self._clients:
                break
            line = bytes(client.inbox[:end])
            del client.inbox[: end + 1]
            if line.strip():
                self._clients.queue(client, protocol.encode(self._answer(line, client)))
        else:
            if b"\n" in client.inbox and client in self._clients:
                self._clients.lines_waiting.add(client)
                return
        if len(client.inbox) > protocol.MAX_LINE_BYTES and client in self._clients:
            client.inbox.clear()
            self._clients.queue(client, protocol.encode(protocol.error_message(
                f"message longer than {protocol.MAX_LINE_BYTES} bytes; closing")))
            client.closing = True  # cannot find the next message boundary: answer, then close
            self._clients.send(client)

    def _answer(self, line: bytes, client: Client | None = None) -> dict[str, Any]:
        """The reply to one line. Nothing a client sends may end the server: what the
        protocol refuses is an error, and so is anything unforeseen."""
        request_id = None
        try:
            request = protocol.parse_request(line)
            request_id = request.id
            if request.kind == "hello":
                return {"type": "ok", "id": request_id, "protocol": protocol.PROTOCOL_VERSION}
            if request.kind == "params":
                self._request_params(client, request_id)
                return {"type": "ok", "id": request_id, "request": "params"}
            self._submit(request.command)
            return {"type": "ok", "id": request_id, "command": command_name(request.command)}
        except ProtocolError as err:
            return protocol.error_message(str(err), err.request_id if request_id is None else request_id)
        except Exception as err:  # noqa: BLE001 - answered as an error; the server goes on
            self._on_internal_error(err)
            return protocol.error_message(
                f"could not handle this message ({type(err).__name__}); nothing was applied", request_id)

    def _submit(self, command: Command) -> None:
        if self._feed.state.is_final:
            raise ProtocolError(f"the run has ended ({self._feed.state.value})")
        if isinstance(command, SetHParams):
            try:
                validate_changes(dict(command.changes))
            except HParamError as err:
                raise ProtocolError(str(err)) from None
        self._check_members(command)
        if not self._command_tokens.take():
            raise ProtocolError(
                f"too many commands (more than {self._command_tokens.rate:g} a second); this one was not applied")
        self._session.submit(command)

    def _check_members(self, command: Command) -> None:
        """A command naming members, refused at once when the latest snapshot shows it
        cannot apply (this run is no population, or has no such member), so the client's
        reply says so. Before the first snapshot the session checks, and says so in a
        warning event; a population's size never changes, so the latest snapshot's holds."""
        if isinstance(command, SetHParams):
            members = command.members
        elif isinstance(command, FreezeMembers):
            members = command.members
        elif isinstance(command, CloneMember):
            members = (command.source, *command.targets)
        else:
            return
        if members is None or self._feed.latest_head is None:
            return
        name = command_name(command)
        population = self._feed.latest_head.get("population")
        if population is None:
            raise ProtocolError(f"{name}: this run is not a population; it has no members to choose")
        size = len(population["members"])
        for member in members:
            if member >= size:
                raise ProtocolError(f"{name}: member {member}: expected a member index from 0 to {size - 1}")

    def _request_params(self, client: Client | None, request_id: Any) -> None:
        """Ask the session for a copy; `send_params` answers once it is there."""
        if client is None:
            raise ProtocolError("params: no client to answer")
        if client.params_pending:
            raise ProtocolError("params: the previous parameters request is still being answered")
        if not self._params_tokens.take():
            raise ProtocolError(
                f"too many parameters requests (more than {self._params_tokens.rate:g} a second, all clients "
                "together); try again")
        client.params_pending = True
        future = self._session.request_params()
        # Called on the session thread (or here, if already answered): post and wake only.
        future.add_done_callback(lambda done: self._post("params", (client, request_id, done)))

    def send_params(self, client: Client, request_id: Any, future) -> None:
        """Answer a parameters request with the session's copy (on the server thread)."""
        if client not in self._clients:
            return
        try:
            snapshot = future.result()
            encoded = self._params_encoded
            if encoded is None or encoded[0] is not snapshot:
                blob = params_transfer.params_blob(snapshot.params, snapshot.obs_stats)
                encoded = self._params_encoded = (snapshot, params_transfer.params_pieces(blob), len(blob))
            _, pieces, size = encoded
            in_flight = self._clients.params_in_flight()
            if id(pieces) not in in_flight and sum(in_flight.values()) + size > MAX_PARAMS_IN_FLIGHT:
                raise ProtocolError("params: the run is busy sending parameters to other clients; try again")
        except Exception as err:  # noqa: BLE001 - ParamsUnavailable, ParamsTooLarge, ...: that client is told
            client.params_pending = False
            refusal = protocol.error_message(str(err) or type(err).__name__, request_id)
            self._clients.queue(client, protocol.encode(refusal))
            return
        self._clients.owe_params(client, OwedParams(request_id, snapshot.update, pieces, size))
