"""`rltui export RUN_OR_CHECKPOINT`: a run's metrics and events, of any age, as TensorBoard event
files or CSV; a checkpoint's policy as a self-contained policy file or an ONNX graph."""

from __future__ import annotations

import csv
import io
import sys
from pathlib import Path
from typing import Any

from rltui.errors import ExitCode, UsageError, warn
from rltui.runfiles.names import CHECKPOINTS, CONFIG
from rltui.runfiles.reader import MEMBERS, RunData, open_run


def export_tensorboard(run: RunData, directory: Path) -> int:
    """Write the run's records and events as fresh TensorBoard runs in `directory`, as its
    logger would have (a population's members in folders of their own); returns the number
    of records written."""
    import time

    from rltui.loggers.base import event_kind
    from rltui.loggers.tensorboard import RunEvent, write_run

    try:
        started = (run.path / CONFIG).stat().st_mtime
    except OSError:
        started = time.time()
    events = []
    for event in run.events:
        data = event.get("data") if isinstance(event.get("data"), dict) else {}
        step = int(data.get("env_steps", int(event.get("update", 0)) * run.steps_per_update))
        events.append(RunEvent(step, event_kind(str(event.get("kind", "")), data), str(event.get("message", ""))))
    # Inside the run directory the files are the run's, its owner's only; a folder named
    # elsewhere keeps the modes the user's umask gives.
    private = Path(directory).resolve().is_relative_to(run.path.resolve())
    return write_run(directory, run.config, run.records, events, started=started, private=private)


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
    if args.tensorboard is None and args.csv is None and args.policy is None and args.onnx is None:
        raise UsageError("export: say what to write: --tensorboard [DIR], --csv FILE, --policy FILE and/or --onnx FILE")
    if args.agent is not None and args.policy is None and args.onnx is None:
        raise UsageError("--agent: goes with --policy or --onnx (it picks the agent whose policy they write)")
    converts = [flag for flag, value in (("--tensorboard", args.tensorboard), ("--csv", args.csv)) if value is not None]
    given = Path(args.run_dir)
    if converts and given.is_file():
        # A checkpoint holds no metrics: they are the run directory's. Checked before any
        # --policy or --onnx is written, so that nothing is half done.
        run_dir = given.parent.parent if given.parent.name == CHECKPOINTS else None
        hint = f"; its run directory is {run_dir}" if run_dir is not None else ""
        raise UsageError(f"{' and '.join(converts)}: convert a run directory's metrics, got the file {given}{hint} "
                         "(a checkpoint file goes with --policy and --onnx)")
    if args.policy is not None or args.onnx is not None:
        export_policy(args)
    if not converts:
        return ExitCode.OK
    run = open_run(Path(args.run_dir))
    # Neither writes over what is there, and both are checked before either writes.
    target = None
    if args.tensorboard is not None:
        from rltui.loggers.tensorboard import event_files

        target = Path(args.tensorboard) if args.tensorboard else run.path
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


def export_policy(args) -> None:
    """--policy and --onnx: both checked before either is written; neither writes over a file."""
    from rltui.runfiles.policy_export import policy_from_checkpoint

    for flag, target in (("--policy", args.policy), ("--onnx", args.onnx)):
        if target is not None and Path(target).exists():
            raise UsageError(f"{flag}: {target} already exists; give another file, or remove it first")
    exported = policy_from_checkpoint(Path(args.run_dir), args.agent)
    header = exported.header
    onnx_bytes = None
    if args.onnx is not None:
        from trainers.policy import ONNX_EXTRA, RECURRENT_ONNX, load_policy, onnx_model

        if header["hidden_size"] is not None:
            raise UsageError(RECURRENT_ONNX)
        try:
            onnx_bytes = onnx_model(load_policy(exported.data))
        except ImportError as err:
            raise UsageError(f"--onnx needs jax2onnx and onnxruntime ({err.name} is not installed): "
                             f"pip install 'rltui[{ONNX_EXTRA}]'") from None
    what = f"{header['algo']} on {header['env']}, update {header['update']}"
    if header.get("agent") is not None:  # one agent of several: which one
        member = f"member {header['member']}, " if header.get("member") is not None else ""
        what += f", agent {header['agent']} ({member}seed {header['seed']})"
    for flag, target, data in (("--policy", args.policy, exported.data), ("--onnx", args.onnx, onnx_bytes)):
        if target is None:
            continue
        try:
            Path(target).write_bytes(data)
        except OSError as err:
            raise UsageError(f"{flag}: cannot write {target}: {err.strerror or err}") from None
        use = f"rltui.load_policy({str(target)!r})" if flag == "--policy" else "onnxruntime, input obs"
        print(f"wrote the policy of {what} to {target} ({len(data) / 1024:,.1f} KiB; {use})")


def add_parser(sub) -> None:
    export = sub.add_parser(
        "export", help="write a run's metrics as TensorBoard event files or CSV, or its policy as a file",
        description="Convert a run's metrics.jsonl and events.jsonl (of any age) to TensorBoard event files or a "
                    "flat CSV table, or write a checkpoint's policy as one self-contained file (--policy: the "
                    "network, its parameters, the observation statistics, the spaces, the env and the update; "
                    "read back with rltui.load_policy(FILE), as data, never unpickled) or as an ONNX graph of "
                    "its greedy action (--onnx, feed-forward networks, with the onnx extra). The run directory "
                    "is only read, unless --tensorboard names no directory.",
    )
    export.add_argument("run_dir", metavar="RUN_OR_CHECKPOINT",
                        help="a run directory (runs/NAME); --policy and --onnx also take a checkpoint file "
                             "(a run directory means its latest checkpoint)")
    export.add_argument("--tensorboard", metavar="DIR", nargs="?", const="", default=None,
                        help="write event files into DIR (default: the run directory, a run by its name in "
                             "tensorboard --logdir runs/), which must hold none yet")
    export.add_argument("--csv", metavar="FILE",
                        help="write a table, one row per update, to FILE, which must not exist yet (- for stdout)")
    export.add_argument("--policy", metavar="FILE",
                        help="write the checkpoint's policy to FILE, which must not exist yet")
    export.add_argument("--onnx", metavar="FILE",
                        help="write the checkpoint's greedy policy as an ONNX model to FILE, which must not exist "
                             "yet (mlp and cnn networks; needs pip install 'rltui[onnx]')")
    export.add_argument("--agent", metavar="I", type=int,
                        help="with several seeds or a population: whose policy --policy and --onnx write (0 is "
                             "the first seed of member 0; member-major, each member's seeds together)")
    export.set_defaults(run=cmd_export)
