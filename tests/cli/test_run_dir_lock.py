"""A run directory has one writer at a time (issue 21, item 2): a second launch or resume
into a directory whose run is alive is refused with one line and exit 2 before it writes
anything there; the lock goes with the process, however it ends (kill -9 included)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_resume_cli import (
    STEPS,
    TINY,
    assert_ok,
    assert_one_line_error,
    checkpoints,
    cli_env,
    read_jsonl,
    rltui,
    start,
    stop,
    updates,
    wait_for,
)

from rltui.config.build import RunConfig
from rltui.config.keys import ConfigError
from rltui.runfiles.names import LOCK as LOCK_NAME
from rltui.runfiles.rundir import prepare_run_dir

HOLD = (
    "import sys\n"
    "from pathlib import Path\n"
    "from rltui.runfiles.rundir import lock_run_dir\n"
    "lock_run_dir(Path(sys.argv[1]), own_folder=True)\n"
    "print('locked', flush=True)\n"
    "sys.stdin.read()\n"
)


@pytest.fixture
def holder(tmp_path, request):
    """A process that holds a run directory's lock until its stdin closes."""
    procs = []

    def hold(run_dir: Path) -> subprocess.Popen:
        run_dir.mkdir(parents=True, exist_ok=True)
        proc = subprocess.Popen(
            [sys.executable, "-c", HOLD, str(run_dir)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=cli_env(),
        )
        procs.append(proc)
        assert proc.stdout.readline().strip() == "locked"
        return proc

    yield hold
    for proc in procs:
        proc.kill()
        proc.wait(timeout=30)


@pytest.fixture(scope="module")
def cache() -> Path:
    """The session's JAX compilation cache (tests/conftest.py): same shapes, so later runs compile fast."""
    return Path(os.environ["XDG_CACHE_HOME"])


def files(run_dir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run_dir)): p.read_bytes() for p in sorted(run_dir.rglob("*")) if p.is_file()}


def test_launch_into_a_directory_in_use_is_refused(tmp_path, holder):
    run_dir = tmp_path / "run"
    proc = holder(run_dir)
    before = files(run_dir)
    with pytest.raises(ConfigError) as caught:
        prepare_run_dir(RunConfig(), str(run_dir))
    message = str(caught.value)
    assert f"{run_dir} is in use by a running rltui (pid {proc.pid})" in message, message
    assert files(run_dir) == before  # no config.toml
    proc.stdin.close()
    proc.wait(timeout=30)
    assert prepare_run_dir(RunConfig(), str(run_dir)) == run_dir  # the owner has gone: free again
    assert (run_dir / "config.toml").exists()


def test_second_writer_refused_while_the_run_lives_then_free_after_kill_9(tmp_path, cache):
    """The reported case: `--resume X` (and `--run-dir X`) while X trains. Refused at once,
    nothing of X touched; after the run dies by SIGKILL the directory is free to resume."""
    run_dir = tmp_path / "X"
    log = tmp_path / "stderr.txt"
    proc = start(
        ["launch", "--no-ui", "--run-dir", run_dir, *TINY, "--set", "total_timesteps=5e7",
         "--set", "checkpoint_every_updates=50", "--set", "keep_checkpoints=1000", "--set", "chunk_seconds=0.05"],
        tmp_path, cache, log,
    )
    try:
        wait_for(lambda: checkpoints(run_dir), proc, "a checkpoint", log)
        assert (run_dir / LOCK_NAME).read_text().strip() == str(proc.pid)
        config = (run_dir / "config.toml").read_bytes()
        for args in (
            ["launch", "--no-ui", "--resume", run_dir, "--set", "total_timesteps=1e8"],
            ["launch", "--no-ui", "--resume", checkpoints(run_dir)[0][1], "--set", "total_timesteps=1e8"],
            ["launch", "--no-ui", "--run-dir", run_dir, *TINY],
        ):
            result = rltui(args, tmp_path, cache, timeout=120)
            assert_one_line_error(result, f"{run_dir} is in use by a running rltui (pid {proc.pid})")
            assert proc.poll() is None
        assert (run_dir / "config.toml").read_bytes() == config
        assert not (run_dir / "metrics.discarded.jsonl").exists()
        assert not (run_dir / "checkpoints" / "discarded").exists()
        done = updates(run_dir)
        assert done == list(range(1, len(done) + 1))  # one writer: no record rewritten under it
        proc.kill()
        proc.wait(timeout=30)
    finally:
        stop(proc)
    latest = checkpoints(run_dir)[-1][0]
    result = rltui(["launch", "--no-ui", "--resume", run_dir, "--set", f"total_timesteps={(latest + 2) * STEPS}"],
                   tmp_path, cache, timeout=300)
    assert_ok(result)
    assert updates(run_dir) == list(range(1, latest + 3))
    assert ("resumed", latest) in [(e["kind"], e["update"]) for e in read_jsonl(run_dir / "events.jsonl")]


def test_launch_into_a_folder_of_runs_is_refused(tmp_path):
    runs = tmp_path / "runs"
    for name in ("a", "b"):
        prepare_run_dir(RunConfig(), str(runs / name))
    (runs / ".tool").mkdir()
    (runs / ".tool" / "config.toml").write_text("")  # a hidden folder is no run
    with pytest.raises(ConfigError) as excinfo:
        prepare_run_dir(RunConfig(), str(runs))
    assert str(excinfo.value) == (f"--run-dir: {runs} is a folder of runs (a, b); give a run its own directory, "
                                  f"e.g. {runs / 'NAME'}")
    assert not (runs / "config.toml").exists()
    assert prepare_run_dir(RunConfig(), str(runs / "c")) == runs / "c"


def test_a_lock_file_that_is_a_pipe_is_checked_without_waiting(tmp_path):
    # Opening a pipe to read waits for a writer: the check must not, and no process holds it.
    from rltui.runfiles.rundir import check_not_in_use

    run = tmp_path / "run"
    run.mkdir()
    os.mkfifo(run / LOCK_NAME)
    check_not_in_use(run)
