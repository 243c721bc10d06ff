"""The policy's parameters over the control socket (server to client, on request): one
msgpack blob sent as base64 pieces in `params` messages, and a client's reassembly of them.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

from rltui.control.protocol import ProtocolError

# A `params` request is answered by `params` messages: the parameters and observation
# statistics as flax state dicts in one msgpack blob (data only: arrays, numbers, strings;
# nothing is unpickled), base64 text in pieces of PARAMS_PIECE_BYTES, each line well under
# what a client reads at once. A blob over MAX_PARAMS_BYTES is refused with an error.
PARAMS_PIECE_BYTES = 48 * 1024
MAX_PARAMS_BYTES = 8 * 2**20


class ParamsTooLarge(ValueError):
    pass


def params_blob(params: Any, obs_stats: Any) -> bytes:
    """(params, obs_stats) as host arrays -> one msgpack blob; ParamsTooLarge past the limit."""
    from flax import serialization

    blob = serialization.msgpack_serialize(
        {"params": serialization.to_state_dict(params), "obs_stats": serialization.to_state_dict(obs_stats)})
    if len(blob) > MAX_PARAMS_BYTES:
        raise ParamsTooLarge(
            f"the policy's parameters are {len(blob) / 2**20:.1f} MiB, more than the control socket sends "
            f"({MAX_PARAMS_BYTES // 2**20} MiB): watch a checkpoint with rltui watch RUN_DIR instead")
    return blob


def params_pieces(blob: bytes) -> list[str]:
    """The blob as base64 pieces, one per `params` message."""
    return [base64.b64encode(blob[i:i + PARAMS_PIECE_BYTES]).decode("ascii")
            for i in range(0, max(len(blob), 1), PARAMS_PIECE_BYTES)]


def params_message(request_id: Any, update: int, part: int, pieces: list[str], size: int) -> dict[str, Any]:
    return {"type": "params", "id": request_id, "update": update, "part": part, "parts": len(pieces),
            "bytes": size, "data": pieces[part]}


class ParamsAssembly:
    """A client's side: the `params` messages of one request, checked as they come (data
    from outside: sizes, order, base64), then the blob restored to state dicts."""

    def __init__(self) -> None:
        self.pieces: list[bytes] = []
        self.received = 0

    def add(self, message: Mapping[str, Any]) -> bool:
        """Take one message; True once the last piece is in. ProtocolError if it is wrong."""
        part, parts, size, data = (message.get(k) for k in ("part", "parts", "bytes", "data"))
        counts = (part, parts, size)
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in counts) \
                or not isinstance(data, str):
            raise ProtocolError("params: a piece without part, parts, bytes or data")
        if size > MAX_PARAMS_BYTES or parts > MAX_PARAMS_BYTES // PARAMS_PIECE_BYTES + 1 or part != len(self.pieces) \
                or part >= parts:
            raise ProtocolError("params: pieces out of order or over the size limit")
        try:
            piece = base64.b64decode(data.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError):
            raise ProtocolError("params: a piece that is not base64") from None
        self.received += len(piece)
        if len(piece) > PARAMS_PIECE_BYTES or self.received > size:
            raise ProtocolError("params: more bytes than announced")
        self.pieces.append(piece)
        if part + 1 < parts:
            return False
        if self.received != size:
            raise ProtocolError("params: fewer bytes than announced")
        return True

    def restore(self) -> dict[str, Any]:
        """The state dicts {"params": ..., "obs_stats": ...}; ProtocolError if unreadable."""
        from flax import serialization

        try:
            state = serialization.msgpack_restore(b"".join(self.pieces))
        except Exception as err:  # noqa: BLE001 - whatever the decoder raises on bad data
            raise ProtocolError(f"params: not a parameters blob ({type(err).__name__})") from None
        if not isinstance(state, dict) or "params" not in state:
            raise ProtocolError("params: not a parameters blob")
        return state
