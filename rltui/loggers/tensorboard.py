"""TensorBoard event files, written with tensorboardX's protocol buffers (no TensorFlow).

Records are framed here (TFRecord: length, masked CRC-32C, data, masked CRC-32C) and written
synchronously on the caller's thread, so a failure (a full disk) surfaces as an exception
that switches the logger off, instead of vanishing in a writer thread.

Steps are env steps. A step never goes backward in the files: when a resumed or rolled-back
run writes at or before a step already written, the event files are first cut back to
before it, so any reader sees one history without duplicate steps (the updates a rollback
undid stay in events.jsonl and metrics.discarded.jsonl).
"""

from __future__ import annotations

import itertools
import json
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
from rltui.loggers.base import event_text, scalars
from rltui.runfiles.names import TEMPORARY_SUFFIX, TENSORBOARD
from trainers.metrics_spec import EPISODE_RETURN

EVENTS_TAG = "events"  # the text of the session's events, at the step each happened
CONFIG_TAG = "config"  # the run's configuration (TOML) at step 0
_TEXT_SUFFIX = "/text_summary"  # tensorboardX's text summaries end so
_FILE_VERSION = "brain.Event:2"
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
    has_config: bool


def run_state(directory: Path) -> RunState:
    last_step, last_text_step, last_text, has_config = -1, -1, "", False
    for event in read_events(directory):
        for value in event.summary.value:
            if value.tag == CONFIG_TAG + _TEXT_SUFFIX:
                has_config = True
                continue
            if value.tag == EVENTS_TAG + _TEXT_SUFFIX:
                if event.step >= last_text_step:
                    last_text_step = event.step
                    last_text = b"".join(value.tensor.string_val).decode("utf-8", "replace")
                continue
            if not value.tag.startswith("_hparams_"):
                last_step = max(last_step, event.step)
    return RunState(last_step, last_text_step, last_text, has_config)


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


def hparam_values(config: Mapping[str, Any]) -> dict[str, Any]:
    """Configuration values as TensorBoard's hparams take them: strings, booleans, numbers
    (lists and tables as JSON text)."""
    out = {}
    for name, value in config.items():
        if isinstance(value, (str, bool, int, float)):
            out[name] = value
        else:
            out[name] = json.dumps(value, default=list, sort_keys=True)
    return out


def scalar_summary(values: Mapping[str, float]) -> Summary:
    return Summary(value=[Summary.Value(tag=tag, simple_value=value) for tag, value in values.items()])


class TensorBoardLogger:
    """Writes a run's records and events into one TensorBoard run directory (`tb/`), going
    on with what is there when the run is resumed or rolled back."""

    label = "tensorboard"

    def __init__(self, directory: Path, config: Mapping[str, Any], *, wall_clock: Callable[[], float] = time.time):
        self.directory = Path(directory)
        self._clock = wall_clock
        self._state = run_state(self.directory)
        self._writer = EventFileWriter(self.directory)
        self._base: float | None = None  # real time at wall_time 0 of the run
        self._pending: dict[int, list[str]] = {}  # events not yet written, by step
        if not self._state.has_config:
            now = self._clock()
            self._writer.write_summary(text_summary(CONFIG_TAG, config_text(config)), 0, now)
            experiment, session_start, _ = hparams_summaries(hparam_values(config), {EPISODE_RETURN: None})
            self._writer.write_summary(experiment, 0, now)
            self._writer.write_summary(session_start, 0, now)
            self._writer.flush()

    def write_records(self, records: list[dict[str, Any]]) -> None:
        if not records:
            return
        first = int(records[0]["env_steps"])
        self._write_pending(before=first + 1)
        if first <= self._state.last_step:
            self._cut(lambda step, tag: step < first)
        if self._base is None:
            self._base = self._clock() - float(records[-1].get("wall_time") or 0.0)
        last = self._state.last_step
        for record in records:
            step = int(record["env_steps"])
            if step <= last:
                continue  # records arrive in order; one at a step already written is a repeat
            self._writer.write_summary(scalar_summary(scalars(record)), step,
                                       self._base + float(record.get("wall_time") or 0.0))
            last = step
        self._state = self._state._replace(last_step=last)

    def write_event(self, step: int, kind: str, message: str) -> None:
        self._pending.setdefault(step, []).append(event_text(kind, message))

    def _write_pending(self, before: int | None = None) -> None:
        for step in sorted(self._pending):
            if before is not None and step >= before:
                break
            self._write_text(step, self._pending.pop(step))

    def _write_text(self, step: int, lines: list[str]) -> None:
        state = self._state
        if step < state.last_step or step <= state.last_text_step:
            # Back in time (a rollback, a resume): drop what lies ahead of `step`, and the
            # text at `step` itself, which is written again below with these lines added.
            earlier = state.last_text if step == state.last_text_step else ""
            self._cut(lambda s, tag: s < step or (s == step and not _is_text(tag)))
            lines = ([earlier] if earlier else []) + lines
            state = self._state
        text = "\n\n".join(lines)
        self._writer.write_summary(text_summary(EVENTS_TAG, text), step, self._clock())
        self._state = state._replace(last_text_step=step, last_text=text, last_step=max(state.last_step, step))

    def _cut(self, keep: Callable[[int, str], bool]) -> None:
        self._writer.close()
        cut_back(self.directory, lambda step, tag: keep(step, tag) or tag == CONFIG_TAG + _TEXT_SUFFIX
                 or tag.startswith("_hparams_"))
        self._state = run_state(self.directory)
        self._writer = EventFileWriter(self.directory)

    def flush(self) -> None:
        self._writer.flush()

    def close(self) -> None:
        try:
            self._write_pending()
            self._writer.flush()
        finally:
            self._writer.close()


def open_logger(run_dir: Path, config: Mapping[str, Any]) -> TensorBoardLogger:
    """The `tensorboard` logger of a run: its event files in the run directory's `tb/`."""
    return TensorBoardLogger(Path(run_dir) / TENSORBOARD, config)
