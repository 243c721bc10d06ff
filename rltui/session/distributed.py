"""Keeping the processes of one multi-process run in step at chunk boundaries.

The session's host loop asks its `BoundarySync` which commands to apply and how many
updates the next chunk runs. In one process that is simply its own queue and its own
measured chunk size (`LocalSync`). In a multi-process run (`ProcessSync`) every process
contributes one fixed-size row to `multihost_utils.process_allgather`, and all of them
take process 0's commands and chunk size from it, so every process pauses, edits, saves
and stops on the same update and runs the same number of updates per chunk (required:
the chunk is one collective program). A stop requested on any process (Ctrl+C, SIGTERM)
stops them all.

While paused, process 0 waits for a command at most `HEARTBEAT_SECONDS`, then exchanges an
empty row anyway; the others sit in that exchange. So no process ever waits in a
collective for longer than a heartbeat, however long the pause: the JAX runtime's
timeouts never see a pause.

The trainer knows none of this: it only ever runs a chunk of an agreed size.
"""

from __future__ import annotations

import dataclasses
import json
import queue
from collections import deque
from pathlib import Path
from typing import Protocol

import numpy as np

from rltui.session.command_json import ProtocolError, command_from_message, command_message
from rltui.session.commands import Command, Stop

HEARTBEAT_SECONDS = 1.0
ROW_BYTES = 4096  # one process's row: header, then its commands as JSON
_HEADER = 3  # int32s: payload length, chunk size, flags
_STOP_FLAG = 1


@dataclasses.dataclass(frozen=True)
class Boundary:
    """What every process does at one chunk boundary."""

    commands: tuple[Command, ...]
    chunk_size: int


class BoundarySync(Protocol):
    writer: bool  # this process writes run files and checkpoints
    distributed: bool  # more than one process trains this run

    def boundary(self, inbox: queue.Queue, paused: bool, chunk_size: int) -> Boundary:
        """The commands to apply now, in order, and the next chunk's size."""

    def agree(self, flag: bool) -> bool:
        """Process 0's value of a decision every process must take alike."""


def _drain(inbox: queue.Queue, wait: float | None, limit: int | None = None) -> list[Command]:
    """Queued commands, waiting up to `wait` seconds for the first (None: forever; 0: not
    at all)."""
    out: list[Command] = []
    try:
        out.append(inbox.get(block=wait != 0, timeout=wait or None))
        while limit is None or len(out) < limit:
            out.append(inbox.get_nowait())
    except queue.Empty:
        pass
    return out


class LocalSync:
    """One process: its own queue; block while paused until a command arrives."""

    writer = True
    distributed = False

    def boundary(self, inbox: queue.Queue, paused: bool, chunk_size: int) -> Boundary:
        return Boundary(tuple(_drain(inbox, None if paused else 0)), chunk_size)

    def agree(self, flag: bool) -> bool:
        return flag


def encode_row(commands: list[Command], chunk_size: int, stop: bool) -> np.ndarray:
    # The control protocol's command messages: one encoding of a command, wherever it travels.
    payload = json.dumps([command_message(c) for c in commands]).encode()
    if len(payload) > ROW_BYTES - 4 * _HEADER:
        raise ValueError("commands do not fit in one row")
    row = np.zeros(ROW_BYTES, np.uint8)
    header = np.array([len(payload), chunk_size, _STOP_FLAG if stop else 0], "<i4")
    row[: 4 * _HEADER] = header.view(np.uint8)
    row[4 * _HEADER : 4 * _HEADER + len(payload)] = np.frombuffer(payload, np.uint8)
    return row


def decode_row(row: np.ndarray) -> tuple[list[Command], int, bool]:
    row = np.ascontiguousarray(row, np.uint8)
    length, chunk_size, flags = (int(v) for v in row[: 4 * _HEADER].view("<i4"))
    payload = row[4 * _HEADER : 4 * _HEADER + length].tobytes()
    commands = []
    for item in json.loads(payload):
        try:
            commands.append(command_from_message(item))
        except ProtocolError:
            # A command the protocol refuses (an empty member list from a local client) is
            # dropped alike on every process: they all decode process 0's row.
            continue
    return commands, chunk_size, bool(flags & _STOP_FLAG)


class ProcessSync:
    """One process of a multi-process run (`jax.distributed` already initialised)."""

    distributed = True

    def __init__(self, process_id: int, heartbeat: float = HEARTBEAT_SECONDS):
        self.process_id = process_id
        self.writer = process_id == 0
        self.heartbeat = heartbeat
        self._held: deque[Command] = deque()  # taken from the queue, not yet sent

    def boundary(self, inbox: queue.Queue, paused: bool, chunk_size: int) -> Boundary:
        commands, stop = self._take(inbox, paused), False
        if not self.writer:
            # Only process 0's commands count; a stop asked here (a signal) stops everyone.
            stop, commands = any(isinstance(c, Stop) for c in commands), []
        rows = self._allgather(encode_row(commands, chunk_size, stop))
        agreed, size, _ = decode_row(rows[0])
        if any(decode_row(row)[2] for row in rows[1:]) and not any(isinstance(c, Stop) for c in agreed):
            agreed.append(Stop())
        return Boundary(tuple(agreed), size)

    def agree(self, flag: bool) -> bool:
        return bool(self._allgather(np.array([int(flag)], np.int32))[0, 0])

    def _take(self, inbox: queue.Queue, paused: bool) -> list[Command]:
        wait = self.heartbeat if paused and self.writer and not self._held else 0
        self._held.extend(_drain(inbox, wait))
        sent: list[Command] = []
        while self._held:  # as many as fit in a row; the rest go at the next boundary
            try:
                encode_row([*sent, self._held[0]], 0, False)
            except ValueError:
                if not sent:
                    self._held.popleft()  # one command too big for any row: drop it
                    continue
                break
            sent.append(self._held.popleft())
        return sent

    @staticmethod
    def _allgather(row: np.ndarray) -> np.ndarray:
        from jax.experimental import multihost_utils

        return np.asarray(multihost_utils.process_allgather(row))


class PeerCheckpoints:
    """The checkpoint store of a process other than 0: it takes part in gathering the
    state (a collective) but writes nothing; process 0 writes the file."""

    def prepare(self) -> None:
        pass

    def paths(self) -> list[Path]:
        return []

    def latest(self) -> Path | None:
        return None

    def save(self, data: bytes, update: int) -> None:
        return None
