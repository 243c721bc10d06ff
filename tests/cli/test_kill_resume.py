"""kill -9 a real headless run at random moments, one of them while a checkpoint is being
written, resume it each time, and compare the completed run with an uninterrupted one
(`test_resume_cli.py`'s slow test kills a run many more times).

The killed run's processes slow every checkpoint write down (half the bytes, a pause, the
rest, through the store's `write_all` seam), so that a kill at a random moment often lands
inside a save, and one kill is made to: it is sent while a save's temp file exists.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_resume_cli import (
    STEPS,
    TINY,
    assert_ok,
    checkpoints,
    cli_env,
    info_fields,
    read_jsonl,
    rltui,
    stop,
    temp_files,
    updates,
    verify_checksum,
    wait_for,
)

TOTAL = 400  # updates
SAVE_PAUSE = 0.1  # seconds in the middle of every checkpoint write of the killed run
SEED = 21  # the kill moments; fixed, so that a failure can be replayed

# `python -c SLOW_SAVES launch ...`: the rltui command, with every checkpoint write paused
# half-way when RLTUI_TEST_SAVE_PAUSE is set.
SLOW_SAVES = """
import os, time
from rltui.runfiles import checkpoints
pause = float(os.environ.get("RLTUI_TEST_SAVE_PAUSE", "0"))
def write_all(f, data):
    f.write(data[: len(data) // 2])
    f.flush()
    time.sleep(pause)
    f.write(data[len(data) // 2 :])
if pause:
    checkpoints.write_all = write_all
from rltui.cli import entry
entry()
"""

CONFIG = [*TINY, "--set", f"total_timesteps={TOTAL * STEPS}"]
VARIABLE = ("wall_time", "sps")  # clock readings: every other field is a result of training


@pytest.fixture(scope="module")
def cache() -> Path:
    """The session's JAX compilation cache (tests/conftest.py): same shapes, so later runs compile fast."""
    return Path(os.environ["XDG_CACHE_HOME"])


def start_slow(args, cwd: Path, cache: Path, log: Path) -> subprocess.Popen:
    env = {**cli_env(cache), "RLTUI_TEST_SAVE_PAUSE": str(SAVE_PAUSE)}
    with open(log, "ab") as err:
        return subprocess.Popen([sys.executable, "-c", SLOW_SAVES, *map(str, args)],
                                cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=err)


def kinds(run_dir: Path, kind: str) -> list[dict]:
    return [e for e in read_jsonl(run_dir / "events.jsonl") if e["kind"] == kind]


def results(run_dir: Path) -> list[str]:
    """Each update's record without its clock readings, as comparable text (NaN included)."""
    return [json.dumps({k: v for k, v in r.items() if k not in VARIABLE}, sort_keys=True)
            for r in read_jsonl(run_dir / "metrics.jsonl")]


def test_kill_9_at_random_moments_then_resume_matches_an_uninterrupted_run(tmp_path, cache):
    """Compared on the same machine, in one test: both runs compile the same programs here, so
    the resumed run's records equal the uninterrupted run's exactly (update indices and every
    metric). Figures from another machine would need a float tolerance; none are used."""
    reference = tmp_path / "uninterrupted"
    assert_ok(rltui(["launch", "--no-ui", "--run-dir", reference, *CONFIG], tmp_path, cache, timeout=300))
    assert updates(reference) == list(range(1, TOTAL + 1))

    rng = random.Random(SEED)
    run_dir = tmp_path / "killed"
    log = tmp_path / "stderr.txt"
    first = ["launch", "--no-ui", "--run-dir", run_dir, *CONFIG, "--set", "checkpoint_every_updates=4",
             "--set", "chunk_seconds=0.02", "--set", "keep_checkpoints=2"]
    again = ["launch", "--no-ui", "--resume", run_dir]
    history = []  # (moment, update of the latest checkpoint after the kill), for failure messages
    for i, moment in enumerate(("random", "mid-save", "random")):
        left_behind = temp_files(run_dir)  # an interrupted save's temp file, removed by the resume
        proc = start_slow(first if i == 0 else again, tmp_path, cache, log)
        try:
            if i:
                wait_for(lambda n=i: len(kinds(run_dir, "resumed")) >= n, proc, f"resume #{i}", log)
                resumed_at = kinds(run_dir, "resumed")[-1]["update"]
                assert resumed_at == history[-1][1], history
                survivors = left_behind & temp_files(run_dir)
                assert not survivors, f"stale temp files survived a resume start: {survivors} ({history})"
            floor = history[-1][1] if history else 0
            if moment == "mid-save":
                def saving(stale=left_behind):
                    return bool(temp_files(run_dir) - stale)

                wait_for(saving, proc, "a checkpoint being written", log)
                in_flight = temp_files(run_dir) - left_behind
            else:
                target = floor + rng.randint(4, 40)
                wait_for(lambda t=target: updates(run_dir)[-1:] >= [t], proc, f"update {target}", log)
                time.sleep(rng.uniform(0, 0.05))
            assert proc.poll() is None, f"the run ended before kill #{i + 1}: make TOTAL larger ({history})"
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        finally:
            stop(proc)
        if i == 0:
            written = (run_dir / "config.toml").stat().st_mtime_ns  # the runs view's start time
        found = checkpoints(run_dir)
        assert found, history
        history.append((moment, found[-1][0]))
        assert verify_checksum(found[-1][1])["update"] == found[-1][0], history
        if moment == "mid-save":
            assert in_flight <= temp_files(run_dir), "the kill did not interrupt the save"
            # What a user reads of the run right after the crash: its latest whole checkpoint.
            info = rltui(["info", run_dir], tmp_path, cache, timeout=120)
            assert info.returncode == 0, (history, info.stderr[-2000:])
            assert info_fields(info.stdout)["update"] == str(found[-1][0]), (history, info.stdout)
        done = updates(run_dir)
        assert done == list(range(1, len(done) + 1)), history
        assert done[-1] < TOTAL, history
        # Besides an interrupted save's own, one more half-written file: the resume removes it too.
        (run_dir / "checkpoints" / ".tmp-checkpoint-planted").write_bytes(b"half a checkpoint")

    assert_ok(rltui(again, tmp_path, cache, timeout=300))
    assert not temp_files(run_dir)
    assert [e["update"] for e in kinds(run_dir, "resumed")] == [latest for _, latest in history]
    assert updates(run_dir) == list(range(1, TOTAL + 1)), history
    # Each kill lost the updates after its latest checkpoint; they were trained again, alike.
    assert os.path.getsize(run_dir / "metrics.discarded.jsonl") > 0, history
    # The resumes changed no key: config.toml is still the one the run started with, as written.
    assert not (run_dir / "config.original.toml").exists()
    assert (run_dir / "config.toml").stat().st_mtime_ns == written
    got, want = results(run_dir), results(reference)
    different = [i + 1 for i, (a, b) in enumerate(zip(got, want)) if a != b]
    assert not different, f"updates {different[:10]} differ from the uninterrupted run's ({history})"


POPULATION_UPDATES = 150
POPULATION = [*TINY, "--sweep", "lr=[1e-3,3e-3,1e-2]", "--set", "pbt_every_updates=6", "--set", "pbt_fraction=0.34",
              "--set", f"total_timesteps={POPULATION_UPDATES * STEPS}"]


def lineage(run_dir: Path) -> list[str]:
    """population.jsonl's lines without their clock readings, as comparable text."""
    return [json.dumps({k: v for k, v in line.items() if k != "wall_time"}, sort_keys=True)
            for line in read_jsonl(run_dir / "population.jsonl")]


def changes_after_the_latest_checkpoint(run_dir: Path) -> list[int]:
    """The updates of population.jsonl's changes that the latest checkpoint does not hold."""
    found = checkpoints(run_dir)
    if not found:
        return []
    held = verify_checksum(found[-1][1])["population"]["changes"]
    return [line["update"] for line in read_jsonl(run_dir / "population.jsonl") if line["seq"] > held]


def test_a_population_under_pbt_killed_after_a_pbt_step_resumes_to_the_uninterrupted_lineage(tmp_path, cache):
    reference = tmp_path / "uninterrupted"
    assert_ok(rltui(["launch", "--no-ui", "--run-dir", reference, *POPULATION], tmp_path, cache, timeout=300))
    run_dir = tmp_path / "killed"
    log = tmp_path / "stderr.txt"
    first = ["launch", "--no-ui", "--run-dir", run_dir, *POPULATION, "--set", "checkpoint_every_updates=10",
             "--set", "chunk_seconds=0.02"]
    again = ["launch", "--no-ui", "--resume", run_dir]
    lost = []  # the updates of the changes each kill left after the latest checkpoint
    for attempt in range(4):
        proc = start_slow(first if attempt == 0 else again, tmp_path, cache, log)
        try:
            wait_for(lambda: changes_after_the_latest_checkpoint(run_dir), proc, "a PBT step after a checkpoint", log)
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        finally:
            stop(proc)
        lost = changes_after_the_latest_checkpoint(run_dir)
        if lost:
            break
    assert lost, "no kill landed between a PBT step and the next checkpoint"
    assert updates(run_dir)[-1] < POPULATION_UPDATES
    assert_ok(rltui(again, tmp_path, cache, timeout=300))
    assert updates(run_dir) == list(range(1, POPULATION_UPDATES + 1))
    assert lineage(run_dir) == lineage(reference)
    moved = [line["update"] for line in read_jsonl(run_dir / "population.discarded.jsonl")]
    assert moved[-len(lost):] == lost
    assert results(run_dir) == results(reference)
