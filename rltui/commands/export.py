"""`rltui export RUN_DIR`: a run's metrics and events, of any age, as TensorBoard event files or
CSV."""

from __future__ import annotations

import csv
import io
import sys
from pathlib import Path
from typing import Any

from rltui.errors import ExitCode, UsageError, warn
from rltui.runfiles.names import CONFIG, TENSORBOARD
from rltui.runfiles.reader import MEMBERS, RunData, open_run
from trainers.metrics_spec import EPISODE_RETURN


def export_tensorboard(run: RunData, directory: Path) -> int:
    """Write the run's records and events as a fresh TensorBoard run in `directory`;
    returns the number of records written."""
    import time

    from rltui.loggers.base import event_kind, event_text, scalars
    from rltui.loggers.tensorboard import (
        CONFIG_TAG,
        EVENTS_TAG,
        EventFileWriter,
        config_text,
        hparam_values,
        hparams_summaries,
        scalar_summary,
        text_summary,
    )

    try:
        started = (run.path / CONFIG).stat().st_mtime
    except OSError:
        started = time.time()
    # Inside the run directory the files are the run's, its owner's only; a folder named
    # elsewhere keeps the modes the user's umask gives.
    writer = EventFileWriter(directory, private=Path(directory).resolve().is_relative_to(run.path.resolve()))
    try:
        writer.write_summary(text_summary(CONFIG_TAG, config_text(run.config)), 0, started)
        experiment, session_start, _ = hparams_summaries(hparam_values(run.config), {EPISODE_RETURN: None})
        writer.write_summary(experiment, 0, started)
        writer.write_summary(session_start, 0, started)
        last, written = -1, 0
        for record in run.records:
            step = int(record.get("env_steps", -1))
            if step <= last:
                continue  # steps only go forward in a run's history; a repeat is left out
            writer.write_summary(scalar_summary(scalars(record)), step, started + float(record.get("wall_time") or 0))
            last, written = step, written + 1
        texts: dict[int, list[str]] = {}
        per_update = run.steps_per_update
        for event in run.events:
            data = event.get("data") if isinstance(event.get("data"), dict) else {}
            step = int(data.get("env_steps", int(event.get("update", 0)) * per_update))
            kind = event_kind(str(event.get("kind", "")), data)
            texts.setdefault(step, []).append(event_text(kind, str(event.get("message", ""))))
        for step in sorted(texts):
            writer.write_summary(text_summary(EVENTS_TAG, "\n\n".join(texts[step])), step, started)
    finally:
        writer.close()
    return written


def csv_columns(records: list[dict[str, Any]]) -> list[str]:
    """update, env_steps, then every other number in the order first seen (a population's
    members after them, seeds last)."""
    from rltui.loggers.base import scalars

    columns: dict[str, None] = {"update": None, "env_steps": None}
    for record in records:
        for name in scalars(record):
            columns.setdefault(name, None)
    plain = [c for c in columns if "/seed_" not in c and not c.startswith(MEMBERS + "/")]
    members = [c for c in columns if "/seed_" not in c and c.startswith(MEMBERS + "/")]
    return plain + members + [c for c in columns if "/seed_" in c]


def write_csv(run: RunData, out) -> int:
    from rltui.loggers.base import scalars

    columns = csv_columns(run.records)
    writer = csv.writer(out)
    writer.writerow(columns)
    for record in run.records:
        values = {**scalars(record), "update": record.get("update"), "env_steps": record.get("env_steps")}
        writer.writerow(["" if values.get(c) is None else _cell(values[c]) for c in columns])
    return len(run.records)


def _cell(value: Any) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(value) if isinstance(value, float) else str(value)


def cmd_export(args) -> int:
    run = open_run(Path(args.run_dir))
    if args.tensorboard is None and args.csv is None:
        raise UsageError("export: say what to write: --tensorboard [DIR] and/or --csv FILE")
    # Neither writes over what is there, and both are checked before either writes.
    target = None
    if args.tensorboard is not None:
        from rltui.loggers.tensorboard import event_files

        target = Path(args.tensorboard) if args.tensorboard else run.path / TENSORBOARD
        if event_files(target):
            raise UsageError(f"--tensorboard: {target} already holds event files; give another directory")
    if args.csv not in (None, "-") and Path(args.csv).is_file():
        raise UsageError(f"--csv: {args.csv} already exists; give another file, or remove it first")
    for problem in run.problems:
        warn(f"{run.path}: {problem}")
    if target is not None:
        try:
            count = export_tensorboard(run, target)
        except OSError as err:
            raise UsageError(f"--tensorboard: cannot write {target}: {err.strerror or err}") from None
        print(f"wrote {count:,} updates and {len(run.events):,} events to {target} (tensorboard --logdir {target})")
    if args.csv is not None:
        if args.csv == "-":
            write_csv(run, sys.stdout)
        else:
            buffer = io.StringIO()
            count = write_csv(run, buffer)
            try:
                Path(args.csv).write_text(buffer.getvalue(), encoding="utf-8", newline="")
            except OSError as err:
                raise UsageError(f"--csv: cannot write {args.csv}: {err.strerror or err}") from None
            print(f"wrote {count:,} updates to {args.csv}")
    return ExitCode.OK


def add_parser(sub) -> None:
    export = sub.add_parser(
        "export", help="write a run's metrics as TensorBoard event files or CSV",
        description="Convert a run's metrics.jsonl and events.jsonl (of any age) to TensorBoard event files or a "
                    "flat CSV table. The run directory is only read, unless --tensorboard names no directory.",
    )
    export.add_argument("run_dir", metavar="RUN_DIR", help="a run directory (runs/NAME)")
    export.add_argument("--tensorboard", metavar="DIR", nargs="?", const="", default=None,
                        help="write event files into DIR (default RUN_DIR/tb), which must hold none yet")
    export.add_argument("--csv", metavar="FILE",
                        help="write a table, one row per update, to FILE, which must not exist yet (- for stdout)")
    export.set_defaults(run=cmd_export)
