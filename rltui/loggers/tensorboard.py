"""TensorBoard event files, written with tensorboardX's protocol buffers (no TensorFlow).

Records are framed here (TFRecord: length, masked CRC-32C, data, masked CRC-32C) and written
synchronously on the caller's thread, so a failure (a full disk) surfaces as an exception
that switches the logger off, instead of vanishing in a writer thread.

A run's event files lie in its run directory, so `tensorboard --logdir runs/` lists it by
name; a population's members are runs of their own, in its `member_<m>/` folders
(`rltui.loggers.layout` says which series and hyperparameters go where).

Steps are env steps. A step never goes backward in the files: when a resumed or rolled-back
run writes at or before a step already written, the event files are first cut back to
before it, so any reader sees one history without duplicate steps (the updates a rollback
undid stay in events.jsonl and metrics.discarded.jsonl).
"""

from __future__ import annotations

import itertools
import os
import struct
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from tensorboardX.proto.event_pb2 import Event
from tensorboardX.proto.summary_pb2 import Summary
from tensorboardX.record_writer import masked_crc32c
from tensorboardX.summary import hparams as hparams_summaries
from tensorboardX.summary import text as text_summary

from rltui.infra import read_limits
from rltui.infra.owner_only import mkdir_private, open_private
from rltui.loggers.base import event_text
from rltui.loggers.layout import hparams, member_hparams, member_run, member_values, record_scalars
from rltui.runfiles.names import TEMPORARY_SUFFIX

EVENTS_TAG = "events"  # the text of the session's events, at the step each happened
CONFIG_TAG = "config"  # the run's configuration (TOML) at step 0
_TEXT_SUFFIX = "/text_summary"  # tensorboardX's text summaries end so
_FILE_VERSION = "brain.Event:2"
_HPARAMS_PREFIX = "_hparams_/"  # tensorboardX's HParams summaries' tags
_sequence = itertools.count()


class Record(NamedTuple):
    raw: bytes  # the serialized Event, as framed in the file
    event: Event


def event_files(directory: Path) -> list[Path]:
    """The event files of a TensorBoard run directory, in the order readers take them."""
    if not Path(directory).is_dir():
        return []
    return sorted(p for p in Path(directory).iterdir() if "tfevents" in p.name and p.is_file())


def read_records(path: Path) -> Iterator[Record]:
    """The events of one file in order, read one record at a time, so a file of any length
    (a long run's) is read in the memory of its largest record; stops quietly at a record cut
    short or damaged (a file being written, or cut by a crash). A record whose intact header
    says it is longer than EVENT_RECORD_BYTES is refused (ReadLimitError), never read."""
    limit = read_limits.EVENT_RECORD_BYTES
    with read_limits.open_bounded(path, None, "an event file") as file:
        while len(head := file.read(12)) == 12:
            header = head[:8]
            (length,) = struct.unpack("<Q", header)
            (header_crc,) = struct.unpack("<I", head[8:])
            if header_crc != masked_crc32c(header):
                return
            if length > limit:
                size, most = read_limits.size_text(length), read_limits.size_text(limit)
                raise read_limits.ReadLimitError(path, f"holds a record of {size}, more than the {most} rltui "
                                                       "reads of one event")
            body = file.read(length + 4)
            if len(body) < length + 4:
                return
            raw = body[:length]
            (data_crc,) = struct.unpack("<I", body[length:])
            if data_crc != masked_crc32c(raw):
                return
            event = Event()
            event.ParseFromString(raw)
            yield Record(raw, event)


def read_events(directory: Path) -> Iterator[Event]:
    for path in event_files(directory):
        for record in read_records(path):
            yield record.event


_FRAMING = 16  # bytes a record's frame adds: length, its CRC, the data's CRC


def _frame(raw: bytes) -> bytes:
    header = struct.pack("<Q", len(raw))
    return header + struct.pack("<I", masked_crc32c(header)) + raw + struct.pack("<I", masked_crc32c(raw))


def _is_text(tag: str) -> bool:
    return tag.endswith(_TEXT_SUFFIX)


def _trimmed(path: Path, keep: Callable[[int, str], bool]) -> Iterator[tuple[Record, bytes | None]]:
    """Each record of `path`, with what is left of it: its own bytes when `keep` takes all of
    its values, new bytes without those it rejects, None when it rejects them all."""
    for record in read_records(path):
        event = record.event
        values = [v for v in event.summary.value if keep(event.step, v.tag)]
        if not event.HasField("summary") or len(values) == len(event.summary.value):
            yield record, record.raw
        elif values:
            trimmed = Event(wall_time=event.wall_time, step=event.step, summary=Summary(value=values))
            yield record, trimmed.SerializeToString()
        else:
            yield record, None


def cut_back(directory: Path, keep: Callable[[int, str], bool]) -> None:
    """Rewrite each event file without the summary values that `keep(step, tag)` rejects;
    a file is replaced whole (written aside, then renamed), so a failure leaves it as it was.
    Records are streamed, once to see whether a file changes and once more to rewrite it,
    so no file is ever held whole."""
    for path in event_files(directory):
        changed, kept_bytes = False, 0
        for record, raw in _trimmed(path, keep):
            changed = changed or raw is not record.raw
            kept_bytes += len(raw) + _FRAMING if raw is not None else 0
        if not changed and kept_bytes == path.stat().st_size:
            continue  # nothing to drop, and no damaged tail to leave out
        tmp = path.with_name(path.name + TEMPORARY_SUFFIX)
        try:
            with open_private(tmp, "wb") as out:
                for _, raw in _trimmed(path, keep):
                    if raw is not None:
                        out.write(_frame(raw))
            os.replace(tmp, path)
        except OSError:
            tmp.unlink(missing_ok=True)
            raise


class RunState(NamedTuple):
    """What a TensorBoard run directory already holds."""

    last_step: int  # highest step of any value (-1: none)
    last_text_step: int  # highest step of an event's text (-1: none)
    last_text: str  # the text written at last_text_step
    has_start: bool  # its configuration or its hyperparameters, written once at step 0


def _is_start(tag: str) -> bool:
    return tag == CONFIG_TAG + _TEXT_SUFFIX or tag.startswith(_HPARAMS_PREFIX)


def run_state(directory: Path) -> RunState:
    last_step, last_text_step, last_text, has_start = -1, -1, "", False
    for event in read_events(directory):
        for value in event.summary.value:
            if _is_start(value.tag):
                has_start = True
                continue
            if value.tag == EVENTS_TAG + _TEXT_SUFFIX:
                if event.step >= last_text_step:
                    last_text_step = event.step
                    last_text = b"".join(value.tensor.string_val).decode("utf-8", "replace")
                continue
            last_step = max(last_step, event.step)
    return RunState(last_step, last_text_step, last_text, has_start)


class EventFileWriter:
    """One new event file in `directory`, written synchronously. `private`: the directory
    is a run's (or in one), and the file and any folder made for it are its owner's only;
    otherwise they are made with the umask's modes, as any program's files, for a folder
    the user names (one shared with a group stays readable to it)."""

    def __init__(self, directory: Path, *, private: bool = True):
        if private:
            mkdir_private(directory)
        else:
            Path(directory).mkdir(parents=True, exist_ok=True)
        # Microseconds, then a sequence number: names sort in the order the files were made,
        # which is the order TensorBoard reads them in.
        stamp = time.time_ns() // 1000
        self.path = directory / f"events.out.tfevents.{stamp:017d}.rltui.{os.getpid()}.{next(_sequence)}"
        self._file = open_private(self.path, "ab") if private else open(self.path, "ab")
        self.write(Event(wall_time=time.time(), file_version=_FILE_VERSION))

    def write(self, event: Event) -> None:
        self._file.write(_frame(event.SerializeToString()))

    def write_summary(self, summary: Summary, step: int, wall_time: float) -> None:
        self.write(Event(wall_time=wall_time, step=step, summary=summary))

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def config_text(config: Mapping[str, Any]) -> str:
    """The configuration as TOML in a code block (TensorBoard renders text as Markdown)."""
    import tomli_w

    return "```toml\n" + tomli_w.dumps(dict(config)) + "```"


def hparams_summary(values: Mapping[str, Any]) -> Summary:
    """A run's hyperparameters as the start of its HParams session. No experiment summary:
    TensorBoard takes one run's for every run in its logdir, hiding the keys of runs of other
    algorithms; without one it gathers the keys, and the metrics, from every run."""
    _, session_start, _ = hparams_summaries(dict(values), {})
    return session_start


def scalar_summary(values: Mapping[str, float]) -> Summary:
    return Summary(value=[Summary.Value(tag=tag, simple_value=value) for tag, value in values.items()])


class _EventRun:
    """One TensorBoard run: the event files of one folder, written on from what they hold."""

    def __init__(self, directory: Path, private: bool):
        self.directory = directory
        self._private = private
        self.state = run_state(directory)
        self.writer = EventFileWriter(directory, private=private)

    def start(self, summaries: list[Summary], wall_time: float) -> None:
        """What a run holds at step 0 (its configuration, its hyperparameters), written once."""
        if not self.state.has_start:
            for summary in summaries:
                self.writer.write_summary(summary, 0, wall_time)
            self.writer.flush()
            self.state = self.state._replace(has_start=True)

    def write_scalars(self, step: int, values: Mapping[str, float], wall_time: float) -> None:
        if values:
            self.writer.write_summary(scalar_summary(values), step, wall_time)
            self.state = self.state._replace(last_step=max(self.state.last_step, step))

    def cut(self, keep: Callable[[int, str], bool]) -> None:
        self.writer.close()
        cut_back(self.directory, lambda step, tag: keep(step, tag) or _is_start(tag))
        self.state = run_state(self.directory)
        self.writer = EventFileWriter(self.directory, private=self._private)


class TensorBoardLogger:
    """Writes a run's records and events as TensorBoard runs in `directory` (a population's
    members in folders of their own there), going on with what is there when the run is
    resumed or rolled back. `started`: the real time of the run's wall time 0 (by default,
    worked out from the first records as they arrive, live)."""

    label = "tensorboard"

    def __init__(self, directory: Path, config: Mapping[str, Any], *, wall_clock: Callable[[], float] = time.time,
                 private: bool = True, started: float | None = None):
        self.directory = Path(directory)
        self._clock = wall_clock
        self._private = private
        self._base = started
        self._pending: dict[int, list[str]] = {}  # events not yet written, by step
        self._run = _EventRun(self.directory, private)
        members = member_values(config)
        now = self._clock()
        # A population's own run holds no hyperparameters: HParams compares its members.
        self._run.start([text_summary(CONFIG_TAG, config_text(config))]
                        + ([] if members else [hparams_summary(hparams(config))]), now)
        self._members: list[_EventRun] = []
        for index, values in enumerate(members):
            self._member(index).start([hparams_summary(member_hparams(config, values))], now)

    def _member(self, index: int) -> _EventRun:
        """Member `index`'s run, opened on first use."""
        while len(self._members) <= index:
            self._members.append(_EventRun(self.directory / member_run(len(self._members)), self._private))
        return self._members[index]

    @property
    def _last_step(self) -> int:
        return max(run.state.last_step for run in (self._run, *self._members))

    def write_records(self, records: list[dict[str, Any]]) -> None:
        if not records:
            return
        first = int(records[0]["env_steps"])
        self._write_pending(before=first + 1)
        if first <= self._last_step:
            self._cut(lambda step, tag: step < first, since=first)
        if self._base is None:
            self._base = self._clock() - float(records[-1].get("wall_time") or 0.0)
        last = self._last_step
        for record in records:
            step = int(record["env_steps"])
            if step <= last:
                continue  # records arrive in order; one at a step already written is a repeat
            wall_time = self._base + float(record.get("wall_time") or 0.0)
            values = record_scalars(record)
            self._run.write_scalars(step, values.run, wall_time)
            for member, member_values_now in enumerate(values.members):
                if member_values_now:  # a frozen member has no point
                    self._member(member).write_scalars(step, member_values_now, wall_time)
            last = step

    def write_event(self, step: int, kind: str, message: str) -> None:
        self._pending.setdefault(step, []).append(event_text(kind, message))

    def _write_pending(self, before: int | None = None) -> None:
        for step in sorted(self._pending):
            if before is not None and step >= before:
                break
            self._write_text(step, self._pending.pop(step))

    def _write_text(self, step: int, lines: list[str]) -> None:
        state = self._run.state
        if step < self._last_step or step <= state.last_text_step:
            # Back in time (a rollback, a resume): drop what lies ahead of `step`, and the
            # text at `step` itself, which is written again below with these lines added.
            earlier = state.last_text if step == state.last_text_step else ""
            self._cut(lambda s, tag: s < step or (s == step and not _is_text(tag)), since=step + 1)
            lines = ([earlier] if earlier else []) + lines
            state = self._run.state
        text = "\n\n".join(lines)
        self._run.writer.write_summary(text_summary(EVENTS_TAG, text), step, self._clock())
        self._run.state = state._replace(last_text_step=step, last_text=text, last_step=max(state.last_step, step))

    def _cut(self, keep: Callable[[int, str], bool], since: int) -> None:
        """Every run's files without what `keep` rejects; a member's only where it holds a
        step from `since` on (the others have nothing to drop)."""
        self._run.cut(keep)
        for run in self._members:
            if run.state.last_step >= since:
                run.cut(keep)

    def flush(self) -> None:
        for run in (self._run, *self._members):
            run.writer.flush()

    def close(self) -> None:
        try:
            self._write_pending()
            self.flush()
        finally:
            for run in (self._run, *self._members):
                run.writer.close()


class RunEvent(NamedTuple):
    step: int
    kind: str
    message: str


def write_run(directory: Path, config: Mapping[str, Any], records: list[dict[str, Any]], events: list[RunEvent],
              *, started: float, private: bool) -> int:
    """A run's history (`rltui export`) as fresh TensorBoard runs in `directory`, as the
    logger writes them live: each event after the record of its step. Returns the number
    of records written (one at a step already written is a repeat, left out)."""
    logger = TensorBoardLogger(directory, config, wall_clock=lambda: started, private=private, started=started)
    pending = sorted(events, key=lambda event: event.step)
    written, last, i = 0, -1, 0
    try:
        for record in records:
            step = int(record.get("env_steps", -1))
            if step <= last:
                continue
            while i < len(pending) and pending[i].step < step:
                logger.write_event(*pending[i])
                i += 1
            logger.write_records([record])
            while i < len(pending) and pending[i].step == step:
                logger.write_event(*pending[i])
                i += 1
            last, written = step, written + 1
        for event in pending[i:]:
            logger.write_event(*event)
    finally:
        logger.close()
    return written


def open_logger(run_dir: Path, config: Mapping[str, Any]) -> TensorBoardLogger:
    """The `tensorboard` logger of a run: its event files in the run directory itself."""
    return TensorBoardLogger(Path(run_dir), config)
