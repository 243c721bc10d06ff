"""A run directory is its owner's alone, as its control socket is: the directory 0700 and
every file and folder in it without a permission for group or others, whatever the umask,
written by rltui or a library (TensorBoard's event files), and an older run's made so when
it resumes."""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

import pytest

from rltui.infra.owner_only import make_private
from rltui.runfiles.rundir import own_entries

from test_cli import TINY, TINY_STEPS, rltui, shared_cache  # noqa: F401 (a fixture)


@contextlib.contextmanager
def umask(mask: int):
    """The umask most systems give their users: what the run's processes inherit."""
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def open_to_others(run_dir: Path) -> dict[str, str]:
    """Every entry of `run_dir` (and itself) that a permission of group or others opens, by
    name and mode."""
    paths = [run_dir, *run_dir.rglob("*")]
    modes = {str(p.relative_to(run_dir)): p.lstat().st_mode for p in paths if not p.is_symlink()}
    return {name: stat.filemode(mode) for name, mode in modes.items() if mode & 0o077}


def test_a_runs_files_are_its_owners_and_a_resume_makes_an_older_runs_so(tmp_path):
    run_dir = tmp_path / "run"
    budget = ["--set", f"total_timesteps={2 * TINY_STEPS}", *TINY, "--set", "loggers=[jsonl, tensorboard]"]
    with umask(0o022):
        first = rltui(["launch", "--no-ui", "--run-dir", str(run_dir), *budget], tmp_path, timeout=300)
    assert first.returncode == 0, first.stderr
    names = {str(p.relative_to(run_dir)) for p in run_dir.rglob("*")}
    assert {"config.toml", "metrics.jsonl", "events.jsonl", "rltui.lock", "checkpoints"} <= names, names
    assert any(name.startswith("events.out.tfevents.") for name in names), names
    assert open_to_others(run_dir) == {}

    # A run written before this rule, or copied in: everything open to others.
    (run_dir / "checkpoints" / "written-by-a-library.txt").write_text("x")
    for path in [run_dir, *run_dir.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    with umask(0o022):
        resumed = rltui(["launch", "--no-ui", "--resume", str(run_dir), "--set", f"total_timesteps={3 * TINY_STEPS}"],
                        tmp_path, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert (run_dir / "config.original.toml").exists()  # the resume changed the config: one more file
    assert open_to_others(run_dir) == {}
    assert stat.S_IMODE(run_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE((run_dir / "metrics.jsonl").stat().st_mode) == 0o600


def test_making_a_run_private_leaves_what_a_link_points_to(tmp_path):
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("not the run's")
    elsewhere.chmod(0o644)
    run_dir = tmp_path / "run"
    run_dir.mkdir(mode=0o755)
    (run_dir / "metrics.jsonl").write_text("{}\n")
    (run_dir / "metrics.jsonl").chmod(0o664)
    (run_dir / "link").symlink_to(elsewhere)
    make_private(run_dir, own_entries(), folder=True)
    assert stat.S_IMODE(run_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE((run_dir / "metrics.jsonl").stat().st_mode) == 0o600
    assert stat.S_IMODE(elsewhere.stat().st_mode) == 0o644


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, shared_cache) -> Path:  # noqa: F811
    """A tiny run that ended with a checkpoint, for each test to copy and change."""
    root = tmp_path_factory.mktemp("finished")
    done = rltui(["launch", "--no-ui", "--run-dir", str(root / "run"), "--set", f"total_timesteps={TINY_STEPS}",
                  *TINY, "--set", "loggers=[jsonl, tensorboard]"], root, cache=shared_cache, timeout=300)
    assert done.returncode == 0, done.stderr
    return root / "run"


def project_folder(path: Path) -> Path:
    """A folder of the user's, shared with a group (setgid, group-writable), with files of
    its own."""
    (path / "src").mkdir(parents=True)
    (path / "src" / "a.py").write_text("print('mine')\n")
    (path / "notes.txt").write_text("mine\n")
    for entry in [path / "src", path / "src" / "a.py", path / "notes.txt"]:
        entry.chmod(0o755 if entry.is_dir() else 0o644)
    path.chmod(0o2775)
    return path


def assert_users_files_untouched(path: Path) -> None:
    assert (mode(path / "src"), mode(path / "src" / "a.py"), mode(path / "notes.txt")) == (0o755, 0o644, 0o644)


def test_a_run_in_a_folder_of_yours_makes_only_its_own_files_private(tmp_path, shared_cache):  # noqa: F811
    folder = project_folder(tmp_path / "project")
    with umask(0o022):
        done = rltui(["launch", "--no-ui", "--run-dir", str(folder), "--set", f"total_timesteps={TINY_STEPS}", *TINY,
                      "--set", "loggers=[jsonl, tensorboard]"], tmp_path, cache=shared_cache, timeout=300)
    assert done.returncode == 0, done.stderr
    assert mode(folder) == 0o2775  # the folder is the user's: its mode and group sharing stay
    assert_users_files_untouched(folder)
    [event_file] = folder.glob("events.out.tfevents.*")
    for name in ("config.toml", "metrics.jsonl", "events.jsonl", "rltui.lock", "checkpoints", event_file.name):
        assert mode(folder / name) & 0o077 == 0, name


def test_a_resume_tightens_the_runs_files_and_folder_and_leaves_the_users(tmp_path, finished_run, shared_cache):  # noqa: F811
    import shutil

    folder = tmp_path / "project"
    shutil.copytree(finished_run, folder)
    project_folder(folder)
    for path in folder.rglob("*"):  # a run from before the rule: everything open to others
        if path.parent != folder / "src" and path.name not in ("src", "notes.txt"):
            path.chmod(0o755 if path.is_dir() else 0o644)
    with umask(0o022):
        resumed = rltui(["launch", "--no-ui", "--resume", str(folder), "--set", f"total_timesteps={2 * TINY_STEPS}"],
                        tmp_path, cache=shared_cache, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert mode(folder) == 0o2700  # the run's folder: no one else's; its setgid stays
    assert_users_files_untouched(folder)
    run_files = [p for p in folder.rglob("*") if p.parent != folder / "src" and p.name not in ("src", "notes.txt")]
    assert {str(p.relative_to(folder)): oct(mode(p)) for p in run_files if mode(p) & 0o077} == {}


def test_a_resume_refuses_a_run_file_that_is_a_pipe_in_one_line(tmp_path, finished_run, shared_cache):  # noqa: F811
    import shutil

    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    (run_dir / "events.jsonl").unlink()
    os.mkfifo(run_dir / "events.jsonl")
    resumed = rltui(["launch", "--no-ui", "--resume", str(run_dir), "--set", f"total_timesteps={2 * TINY_STEPS}"],
                    tmp_path, cache=shared_cache, timeout=120)
    assert resumed.returncode != 0
    errors = [line for line in resumed.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and "events.jsonl: is not a regular file" in errors[0], resumed.stderr
    assert "Traceback" not in resumed.stderr


def test_a_resume_reads_config_toml_as_a_config_is_read(tmp_path, finished_run, shared_cache):  # noqa: F811
    """config.toml is read whole and copied aside when a resume changes the configuration:
    a pipe (or a device, or a huge file) in its place is refused in one line, not waited on
    or copied without end."""
    import shutil

    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    (run_dir / "config.toml").unlink()
    os.mkfifo(run_dir / "config.toml")
    resumed = rltui(["launch", "--no-ui", "--resume", str(run_dir), "--set", f"total_timesteps={2 * TINY_STEPS}"],
                    tmp_path, cache=shared_cache, timeout=120)
    assert resumed.returncode == 2, resumed.stderr
    assert resumed.stderr.strip().count("\n") == 0, resumed.stderr
    assert "config.toml: is not a regular file" in resumed.stderr
    assert not (run_dir / "config.original.toml").exists()


def test_the_original_config_kept_by_a_resume_is_private_and_keeps_its_time(tmp_path, finished_run, shared_cache):  # noqa: F811
    import shutil

    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    before = (run_dir / "config.toml").read_text()
    (run_dir / "config.toml").chmod(0o644)
    os.utime(run_dir / "config.toml", (1_000_000_000, 1_000_000_000))
    with umask(0o022):
        resumed = rltui(["launch", "--no-ui", "--resume", str(run_dir), "--set", f"total_timesteps={2 * TINY_STEPS}"],
                        tmp_path, cache=shared_cache, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    original = run_dir / "config.original.toml"
    assert original.read_text() == before
    assert (mode(original), original.stat().st_mtime) == (0o600, 1_000_000_000)


def test_an_export_into_a_folder_you_name_keeps_your_umask(tmp_path, finished_run, shared_cache):  # noqa: F811
    """A TensorBoard folder shared with a group stays readable to it; an export into the run
    directory is the run's, and private."""
    import shutil

    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    for event_file in run_dir.glob("events.out.tfevents.*"):
        event_file.unlink()
    with umask(0o022):
        shared = rltui(["export", str(run_dir), "--tensorboard", str(tmp_path / "shared" / "run")], tmp_path,
                       cache=shared_cache, timeout=120)
        own = rltui(["export", str(run_dir), "--tensorboard"], tmp_path, cache=shared_cache, timeout=120)
    assert shared.returncode == 0 and own.returncode == 0, shared.stderr + own.stderr
    [exported] = (tmp_path / "shared" / "run").iterdir()
    assert (mode(tmp_path / "shared" / "run"), mode(exported)) == (0o755, 0o644)
    [in_run] = run_dir.glob("events.out.tfevents.*")
    assert (mode(run_dir), mode(in_run)) == (0o700, 0o600)
