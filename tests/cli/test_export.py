"""`rltui export RUN_DIR --tensorboard [DIR] | --csv FILE`, and reading run directories as
they are: partial last lines, damaged lines, older runs, never writing into the run."""

from __future__ import annotations

import csv
import json
import math
import os
from pathlib import Path

import pytest

from rltui.cli import main
from rltui.loggers.base import scalars
from rltui.runfiles.reader import read_run

STEPS = 128


def make_run(path: Path, updates: int, *, config: dict | None = None, seeds: int = 1, ret=None,
             events: list[dict] | None = None) -> Path:
    """A run directory as rltui writes it (or an older rltui wrote it: no newer fields)."""
    path.mkdir(parents=True)
    config = {"env": "CartPole-v1", "algo": "ppo", "lr": 3e-4, "num_envs": 4, "num_steps": 32, "seed": 0,
              "hidden_sizes": [16], **(config or {})}
    import tomli_w

    (path / "config.toml").write_text(tomli_w.dumps(config))
    ret = ret or (lambda u: 2.0 * u)
    lines = []
    for u in range(1, updates + 1):
        rec = {"update": u, "env_steps": u * STEPS, "wall_time": 0.25 * u, "sps": 512.0,
               "episode_return": None if u % 3 == 0 else ret(u), "policy_loss": -0.001 * u}
        if seeds > 1:
            rec["seeds"] = {"episode_return": [None if u % 3 == 0 else ret(u) + i for i in range(seeds)]}
        lines.append(json.dumps(rec) + "\n")
    (path / "metrics.jsonl").write_text("".join(lines))
    events = events if events is not None else [
        {"kind": "compiled", "update": 0, "wall_time": 0.1, "message": "compiled in 0.1 s"},
        {"kind": "hparams", "update": 2, "wall_time": 0.5, "message": "set lr=0.001"},
        {"kind": "finished", "update": updates, "wall_time": 0.25 * updates, "message": f"finished {updates} updates"},
    ]
    (path / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


def snapshot(path: Path) -> dict[str, tuple[int, float]]:
    return {str(p.relative_to(path)): (p.stat().st_size, p.stat().st_mtime) for p in path.rglob("*")}


def test_export_tensorboard_matches_metrics_jsonl(tmp_path, capsys):
    run = make_run(tmp_path / "run", 12, seeds=2)
    before = snapshot(run)
    assert main(["export", str(run), "--tensorboard", str(tmp_path / "out")]) == 0
    assert "wrote 12 updates and 3 events" in capsys.readouterr().out
    assert snapshot(run) == before  # the run directory is only read

    from test_loggers import accumulate, assert_matches, texts

    acc = accumulate(tmp_path / "out")
    assert_matches(acc, read_run(run).records)
    assert texts(acc, "events") == [(0, "**compiled**: compiled in 0.1 s"), (2 * STEPS, "**hparams**: set lr=0.001"),
                                    (12 * STEPS, "**finished**: finished 12 updates")]


def test_export_of_an_older_run_without_events_and_with_a_partial_last_line(tmp_path, capsys):
    run = make_run(tmp_path / "old", 5, events=[])
    (run / "events.jsonl").unlink()
    with open(run / "metrics.jsonl", "a") as f:
        f.write('{"update": 6, "env_st')  # the run is being written, or crashed mid-line
    assert main(["export", str(run), "--tensorboard"]) == 0  # default: the run directory, a run by its name
    assert capsys.readouterr().err == ""  # a partial last line is not damage

    from test_loggers import accumulate, assert_matches

    assert_matches(accumulate(run), read_run(run).records)
    assert len(read_run(run).records) == 5
    assert main(["export", str(run), "--tensorboard"]) == 2  # never over existing event files
    assert "already holds event files" in capsys.readouterr().err


def test_export_csv_is_one_row_per_update(tmp_path):
    run = make_run(tmp_path / "run", 6, seeds=2)
    out = tmp_path / "run.csv"
    assert main(["export", str(run), "--csv", str(out)]) == 0
    rows = list(csv.DictReader(out.open()))
    assert [int(r["update"]) for r in rows] == list(range(1, 7))
    assert list(rows[0])[:4] == ["update", "env_steps", "wall_time", "sps"]
    assert rows[2]["episode_return"] == "" and rows[2]["episode_return/seed_1"] == ""  # null: empty cell
    for row, record in zip(rows, read_run(run).records):
        for name, value in scalars(record).items():
            assert math.isclose(float(row[name]), value, rel_tol=1e-12)


def test_export_never_writes_over_an_existing_csv(tmp_path, capsys):
    # As --tensorboard refuses a directory holding event files, --csv refuses a file that
    # exists: one line naming it and what to do, exit 2, the file as it was, and nothing
    # else written (the check comes before --tensorboard writes).
    run = make_run(tmp_path / "run", 6)
    out = tmp_path / "run.csv"
    out.write_text("mine\n")
    assert main(["export", str(run), "--tensorboard", str(tmp_path / "tb"), "--csv", str(out)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"rltui: error: --csv: {out} already exists; give another file, or remove it first"]
    assert out.read_text() == "mine\n" and not (tmp_path / "tb").exists()
    out.unlink()
    assert main(["export", str(run), "--csv", str(out)]) == 0
    assert main(["export", str(run), "--csv", os.devnull]) == 0  # not a regular file: nothing to lose


def test_damaged_lines_are_skipped_and_said(tmp_path, capsys):
    run = make_run(tmp_path / "run", 4)
    text = (run / "metrics.jsonl").read_text().splitlines(True)
    text.insert(2, "\x00\x00garbage\n")
    (run / "metrics.jsonl").write_text("".join(text))
    data = read_run(run)
    assert [r["update"] for r in data.records] == [1, 2, 3, 4]
    assert data.problems == ["1 damaged line in metrics.jsonl"]
    assert main(["export", str(run), "--csv", "-"]) == 0
    captured = capsys.readouterr()
    assert "1 damaged line in metrics.jsonl" in captured.err
    assert len(captured.out.splitlines()) == 5


DEEP = "[" * 50_000 + "]" * 50_000  # deeper than Python's JSON parser recurses


@pytest.mark.parametrize("args", [["export", "RUN", "--csv", "-"], ["export", "RUN", "--tensorboard", "OUT"],
                                  ["compare", "RUN"]], ids=["csv", "tensorboard", "compare"])
def test_a_line_nested_too_deeply_is_a_damaged_line(tmp_path, capsys, args):
    run = make_run(tmp_path / "run", 4)
    text = (run / "metrics.jsonl").read_text().splitlines(True)
    text.insert(2, DEEP + "\n")
    (run / "metrics.jsonl").write_text("".join(text))
    assert main([{"RUN": str(run), "OUT": str(tmp_path / "tb")}.get(a, a) for a in args]) == 0
    captured = capsys.readouterr()
    # export warns of it; compare marks the run in its table
    assert "1 damaged line in metrics.jsonl" in captured.err + captured.out and "Traceback" not in captured.err
    assert [r["update"] for r in read_run(run).records] == [1, 2, 3, 4]


def test_a_line_longer_than_the_bound_is_passed_over_unread(tmp_path, monkeypatch):
    from rltui.infra import read_limits
    run = make_run(tmp_path / "run", 4)
    monkeypatch.setattr(read_limits, "JSONL_LINE_BYTES", 4096)
    long_record = json.dumps({"update": 5, "env_steps": 5 * STEPS, "note": "x" * 8192})
    with open(run / "metrics.jsonl", "a") as file:
        file.write(long_record + "\n" + json.dumps({"update": 6, "env_steps": 6 * STEPS}) + "\n")
    data = read_run(run)
    assert [r["update"] for r in data.records] == [1, 2, 3, 4, 6]
    assert data.problems == ["1 damaged line in metrics.jsonl"]


def test_text_no_terminal_could_print_is_written_escaped(tmp_path, capsys):
    # JSON may escape a lone surrogate, a str that no UTF-8 stream or file writes.
    run = make_run(tmp_path / "run", 2, events=[{"kind": "warning", "update": 1, "message": "odd \ud800"}])
    with open(run / "metrics.jsonl", "a") as file:
        file.write(json.dumps({"update": 3, "env_steps": 3 * STEPS, "odd\udfff": 1.5}) + "\n")
    assert main(["export", str(run), "--csv", "-", "--tensorboard", str(tmp_path / "tb")]) == 0
    lines = capsys.readouterr().out.splitlines()[1:]  # after the line saying what --tensorboard wrote
    assert lines[0].endswith(",odd\\udfff") and lines[-1].endswith(",1.5")

    from test_loggers import accumulate, texts

    assert texts(accumulate(tmp_path / "tb"), "events") == [(STEPS, "**warning**: odd \\ud800")]


def test_a_run_file_that_is_no_regular_file_is_not_read(tmp_path, capsys):
    run = make_run(tmp_path / "run", 4)
    (run / "events.jsonl").unlink()
    (run / "events.jsonl").symlink_to(os.devnull if not Path("/dev/zero").exists() else "/dev/zero")
    (run / "config.toml").unlink()
    os.mkfifo(run / "config.toml")  # a pipe nobody writes to: reading it would wait for ever
    assert main(["export", str(run), "--csv", "-"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err == [f"rltui: warning: {run}: cannot read config.toml: is not a regular file",
                   f"rltui: warning: {run}: cannot read events.jsonl: is not a regular file"]


@pytest.mark.parametrize("make, message", [
    (lambda p: p, "is not a directory"),
    (lambda p: (p.mkdir(), p)[1], "is not a run directory"),
])
def test_not_a_run_is_one_line_and_exit_2(tmp_path, capsys, make, message):
    path = make(tmp_path / "nothing")
    assert main(["export", str(path), "--csv", "-"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rltui: error: RUN_DIR:") and message in err[0]


def test_converting_a_checkpoint_file_names_its_run_directory_and_writes_nothing(tmp_path, capsys):
    run = make_run(tmp_path / "run", 2)
    (run / "checkpoints").mkdir()
    checkpoint = run / "checkpoints" / "checkpoint-000000002.msgpack"
    checkpoint.write_bytes(b"not read")
    assert main(["export", str(checkpoint), "--csv", str(tmp_path / "out.csv"),
                 "--policy", str(tmp_path / "out.policy")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"rltui: error: --csv: convert a run directory's metrics, got the file {checkpoint}; its run "
                   f"directory is {run} (a checkpoint file goes with --policy and --onnx)"]
    assert not (tmp_path / "out.csv").exists() and not (tmp_path / "out.policy").exists()


def test_export_needs_a_format(tmp_path, capsys):
    run = make_run(tmp_path / "run", 2)
    assert main(["export", str(run)]) == 2
    assert "--tensorboard [DIR], --csv FILE, --policy FILE and/or --onnx FILE" in capsys.readouterr().err


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any directory")
def test_an_unreadable_run_is_one_line(tmp_path, capsys):
    run = make_run(tmp_path / "run", 2)
    run.chmod(0)
    try:
        assert main(["export", str(run), "--csv", "-"]) == 2
    finally:
        run.chmod(0o755)
    assert "cannot read" in capsys.readouterr().err
