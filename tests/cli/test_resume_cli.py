"""Checkpoints, `--resume`, `rltui eval` and `rltui info`, run as a user would:
`python -m rltui ...` subprocesses on a tiny CartPole config.

Every real run in this module uses the same static config, so after the first compile the
shared XDG cache (JAX's persistent compilation cache) makes the others cheap.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import msgpack
import pytest

from test_cli import cli_env

REPO = Path(__file__).resolve().parents[2]

# 4 envs x 32 steps = 128 env steps per update. anneal_lr=false: the learning rate must
# not depend on total_timesteps, which differs between an uninterrupted and a resumed run.
TINY = [
    "--set", "num_envs=4", "--set", "num_steps=32", "--set", "num_minibatches=2", "--set", "update_epochs=1",
    "--set", "hidden_sizes=[16]", "--set", "anneal_lr=false",
]
STEPS = 128
K = 8  # run B stops after K updates; run A goes to 2K uninterrupted
COMPARED = (
    "policy_loss", "value_loss", "entropy", "approx_kl", "clip_frac", "grad_norm", "lr",
    "episode_return", "episode_length",
)
GUARDED = ("policy_loss", "value_loss", "entropy", "grad_norm")  # non-finite -> divergence
CKPT_NAME = re.compile(r"^checkpoint-(\d{9})\.msgpack$")


# --- helpers ------------------------------------------------------------------------------


def rltui(args, cwd: Path, cache: Path | None = None, *, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rltui", *map(str, args)],
        cwd=cwd, env=cli_env(cache), capture_output=True, text=True, timeout=timeout,
    )


def start(args, cwd: Path, cache: Path | None, stderr_path: Path) -> subprocess.Popen:
    with open(stderr_path, "ab") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "rltui", *map(str, args)],
            cwd=cwd, env=cli_env(cache), stdout=subprocess.DEVNULL, stderr=err,
        )


def read_jsonl(path: Path) -> list[dict]:
    """Records of a JSONL file; a last line cut short by kill -9 is skipped."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def checkpoints(run_dir: Path) -> list[tuple[int, Path]]:
    directory = run_dir / "checkpoints"
    if not directory.is_dir():
        return []
    found = []
    for path in directory.iterdir():
        match = CKPT_NAME.match(path.name)
        if match:
            found.append((int(match.group(1)), path))
    return sorted(found)


def temp_files(run_dir: Path) -> set[str]:
    directory = run_dir / "checkpoints"
    return {p.name for p in directory.glob(".tmp-checkpoint-*")} if directory.is_dir() else set()


def updates(run_dir: Path) -> list[int]:
    return [r["update"] for r in read_jsonl(run_dir / "metrics.jsonl")]


def assert_ok(result: subprocess.CompletedProcess) -> None:
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr + result.stdout


def assert_one_line_error(result: subprocess.CompletedProcess, *needles: str) -> str:
    """Exit 2, exactly one 'rltui: error:' line on stderr, no traceback; returns the line."""
    assert result.returncode == 2, (result.returncode, result.stderr[-3000:])
    assert "Traceback" not in result.stderr + result.stdout, result.stderr[-3000:]
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr[-3000:]
    line = lines[0]
    assert line.startswith("rltui: error:"), line
    for needle in needles:
        assert needle.lower() in line.lower(), (needle, line)
    return line


def verify_checksum(path: Path) -> dict:
    """The file is a complete checkpoint: its map unpacks and the digest matches the state."""
    outer = msgpack.unpackb(path.read_bytes(), raw=False)
    assert outer["format"] == "rltui-checkpoint"
    assert hashlib.sha256(outer["state"]).hexdigest() == outer["sha256"], path
    return json.loads(outer["metadata"])


def rewrite_checkpoint(src: Path, dst: Path, edit) -> None:
    """Unpack the outer msgpack map, let `edit` change it, pack it again (state untouched)."""
    outer = msgpack.unpackb(src.read_bytes(), raw=False)
    edit(outer)
    dst.write_bytes(msgpack.packb(outer, use_bin_type=True))


def info_fields(stdout: str) -> dict[str, str]:
    """The facts `rltui info` prints first, one per line: name, then value."""
    out = {}
    for line in stdout.split("\n\n")[0].splitlines():
        key, _, value = line.partition(" ")
        out[key] = value.strip()
    return out


def info_json(work: Path, cache: Path, run: Path | str) -> dict:
    result = rltui(["info", str(run), "--json"], work, cache, timeout=120)
    assert_ok(result)
    return json.loads(result.stdout)


_EVAL = re.compile(r"mean (\S+)\s+std (\S+)\s+min (\S+)\s+max (\S+)")


def eval_stats(stdout: str) -> dict[str, float]:
    match = _EVAL.search(stdout)
    assert match, stdout
    return dict(zip(("mean", "std", "min", "max"), map(float, match.groups())))


def wait_for(predicate, proc: subprocess.Popen, what: str, stderr_path: Path, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if proc.poll() is not None:
            if predicate():
                return
            pytest.fail(f"run ended ({proc.returncode}) before {what}: {stderr_path.read_text()[-3000:]}")
        time.sleep(0.02)
    pytest.fail(f"timed out waiting for {what}")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=30)


# --- shared runs --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cache() -> Path:
    """The session's JAX compilation cache (tests/conftest.py): same shapes, so later runs compile fast."""
    return Path(os.environ["XDG_CACHE_HOME"])


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("resume")


@pytest.fixture(scope="module")
def run_a(work, cache):
    """2K updates uninterrupted, a checkpoint at every chunk boundary (short chunks), keep 2."""
    run_dir = work / "A"
    result = rltui(
        ["launch", "--no-ui", "--run-dir", run_dir, *TINY, "--set", f"total_timesteps={2 * K * STEPS}",
         "--set", "checkpoint_every_updates=1", "--set", "chunk_seconds=0.01", "--set", "keep_checkpoints=2"],
        work, cache, timeout=400,
    )
    assert_ok(result)
    return run_dir


@pytest.fixture(scope="module")
def run_b(work, cache, run_a):
    """K updates, then `--resume <dir>` to 2K. Returns (resumed dir, untouched snapshot of
    the dir as it was after the first K updates, the resume's result)."""
    run_dir = work / "B"
    first = rltui(["launch", "--no-ui", "--run-dir", run_dir, *TINY, "--set", f"total_timesteps={K * STEPS}"],
                  work, cache, timeout=300)
    assert_ok(first)
    snapshot = work / "B-after-K"
    shutil.copytree(run_dir, snapshot)
    resumed = rltui(["launch", "--no-ui", "--resume", run_dir, "--set", f"total_timesteps={2 * K * STEPS}"],
                    work, cache, timeout=300)
    return run_dir, snapshot, resumed


# --- 1. checkpoints of a headless run -----------------------------------------------------


def test_headless_run_writes_and_prunes_checkpoints(run_a):
    found = checkpoints(run_a)
    assert found, "no checkpoints written"
    assert len(found) <= 2, [p.name for _, p in found]
    assert found[-1][0] == 2 * K
    assert found[-1][1].name == f"checkpoint-{2 * K:09d}.msgpack"
    assert not temp_files(run_a)

    events = [e for e in read_jsonl(run_a / "events.jsonl") if e["kind"] == "checkpoint"]
    # a checkpoint at every chunk boundary: at least 3 saves, so keep=2 had to prune
    assert len(events) >= 3, events
    saved = [e["update"] for e in events]
    assert saved == sorted(set(saved)) and saved[-1] == 2 * K, saved
    for event in events:
        assert Path(event["data"]["path"]).name == f"checkpoint-{event['update']:09d}.msgpack", event
        assert f"checkpoint-{event['update']:09d}" in event["message"]
    # what is left on disk is exactly the newest two saves
    assert [u for u, _ in found] == saved[-2:]
    for _, path in found:
        assert verify_checksum(path)["update"] == int(CKPT_NAME.match(path.name).group(1))


# --- 2. bit-exact resume ------------------------------------------------------------------


def test_resume_is_bit_exact(run_a, run_b):
    """On the same machine: both runs compile the same program here. Resumed figures equal
    an uninterrupted run's bit for bit only on one machine; another CPU rounds differently."""
    run_dir, snapshot, resumed = run_b
    assert_ok(resumed)
    assert [u for u, _ in checkpoints(snapshot)] == [K]
    a = read_jsonl(run_a / "metrics.jsonl")
    b = read_jsonl(run_dir / "metrics.jsonl")
    assert [r["update"] for r in a] == list(range(1, 2 * K + 1))
    assert [r["update"] for r in b] == list(range(1, 2 * K + 1))
    for ra, rb in zip(a, b):
        assert rb["env_steps"] == ra["env_steps"] == ra["update"] * STEPS
        diff = {f: (ra[f], rb[f]) for f in COMPARED if ra[f] != rb[f]}
        assert not diff, f"update {ra['update']}: {diff}"
    kinds = [(e["kind"], e["update"]) for e in read_jsonl(run_dir / "events.jsonl")]
    assert ("resumed", K) in kinds, kinds
    assert checkpoints(run_dir)[-1][0] == 2 * K


# --- 3. resume variants and bad input -------------------------------------------------------


def test_resume_from_checkpoint_file_with_new_lr(work, cache, run_b):
    _, snapshot, _ = run_b
    run_dir = work / "B-file"
    shutil.copytree(snapshot, run_dir)
    before = read_jsonl(run_dir / "metrics.jsonl")
    ckpt = run_dir / "checkpoints" / f"checkpoint-{K:09d}.msgpack"
    total = K + 4
    result = rltui(
        ["launch", "--no-ui", "--resume", ckpt, "--set", "lr=1e-4", "--set", f"total_timesteps={total * STEPS}"],
        work, cache, timeout=300,
    )
    assert_ok(result)
    records = read_jsonl(run_dir / "metrics.jsonl")
    assert [r["update"] for r in records] == list(range(1, total + 1))
    assert records[:K] == before  # the curves continue in the same file
    assert all(r["lr"] == pytest.approx(2.5e-4, rel=1e-6) for r in records[:K])
    assert all(r["lr"] == pytest.approx(1e-4, rel=1e-6) for r in records[K:]), [r["lr"] for r in records[K:]]
    assert checkpoints(run_dir)[-1][0] == total
    assert verify_checksum(checkpoints(run_dir)[-1][1])["hparams"]["lr"] == pytest.approx(1e-4, rel=1e-6)


def test_a_resume_says_how_many_records_written_after_its_checkpoint_it_set_aside(work, cache, run_b):
    # As a crash leaves them: records of updates after the latest checkpoint.
    _, snapshot, _ = run_b
    run_dir = work / "B-crashed"
    shutil.copytree(snapshot, run_dir)
    with open(run_dir / "metrics.jsonl", "a", encoding="utf-8") as out:
        for update in range(K + 1, K + 4):
            out.write(json.dumps({"update": update, "env_steps": update * STEPS}) + "\n")
    result = rltui(["launch", "--no-ui", "--resume", run_dir, "--set", f"total_timesteps={(K + 4) * STEPS}"],
                   work, cache, timeout=300)
    assert_ok(result)
    assert (f"rltui: 3 metrics records after the checkpoint's update {K:,} (written before the run stopped) moved "
            "to metrics.discarded.jsonl") in result.stderr, result.stderr
    assert [r["update"] for r in read_jsonl(run_dir / "metrics.discarded.jsonl")] == [K + 1, K + 2, K + 3]


def test_resume_into_a_new_run_dir(work, cache, run_b):
    _, snapshot, _ = run_b
    metrics = (snapshot / "metrics.jsonl").read_bytes()
    new = work / "B-elsewhere" / "not-yet-there"
    result = rltui(
        ["launch", "--no-ui", "--resume", snapshot, "--run-dir", new, "--set", f"total_timesteps={(K + 2) * STEPS}"],
        work, cache, timeout=300,
    )
    assert_ok(result)
    assert [r["update"] for r in read_jsonl(new / "metrics.jsonl")] == [K + 1, K + 2]
    assert checkpoints(new)[-1][0] == K + 2
    assert (snapshot / "metrics.jsonl").read_bytes() == metrics  # the old run is left as it was
    events = read_jsonl(new / "events.jsonl")
    # Every event of the resumed run carries its update and the run's clock, continued.
    assert [(e["kind"], e["update"]) for e in events[:2]] == [("resumed", K), ("compiled", K)]
    assert [e["wall_time"] for e in events] == sorted(e["wall_time"] for e in events)


def test_resume_to_a_total_already_reached_is_refused(work, cache, run_b):
    _, snapshot, _ = run_b
    config = (snapshot / "config.toml").read_bytes()
    result = rltui(["launch", "--no-ui", "--resume", snapshot], work, cache, timeout=120)
    line = assert_one_line_error(result, "total_timesteps", f"at update {K} ")
    assert f"--set total_timesteps={2 * K * STEPS}" in line
    assert (snapshot / "config.toml").read_bytes() == config
    # Larger than the checkpoint's env steps, but not by a whole update: the line says why.
    between = K * STEPS + STEPS // 2
    result = rltui(["launch", "--no-ui", "--resume", snapshot, "--set", f"total_timesteps={between}"], work, cache,
                   timeout=120)
    line = assert_one_line_error(result, "total_timesteps", f"{between:,} (rounded down to whole updates of {STEPS:,}")


@pytest.mark.parametrize("key,value", [
    ("num_envs", "8"),
    ("hidden_sizes", "[32]"),
    ("env", "Acrobot-v1"),
])
def test_resume_refuses_shape_changes(work, cache, run_b, key, value):
    _, snapshot, _ = run_b
    metrics = (snapshot / "metrics.jsonl").read_bytes()
    config = (snapshot / "config.toml").read_bytes()
    result = rltui(["launch", "--no-ui", "--resume", snapshot, "--set", f"{key}={value}"], work, cache, timeout=120)
    line = assert_one_line_error(result, "resum")
    assert line.startswith(f"rltui: error: {key}:"), line
    if key == "hidden_sizes":  # the value as a config file writes it, not Python's (16,)
        assert "(the checkpoint was made with [16])" in line, line
    assert (snapshot / "metrics.jsonl").read_bytes() == metrics
    assert (snapshot / "config.toml").read_bytes() == config


def _ckpt(run_dir: Path) -> Path:
    return checkpoints(run_dir)[-1][1]


def _missing(run_dir: Path) -> Path:
    return run_dir / "no-such-checkpoint.msgpack"


def _no_checkpoints(run_dir: Path) -> Path:
    shutil.rmtree(run_dir / "checkpoints")
    return run_dir


def _truncated(run_dir: Path) -> Path:
    path = _ckpt(run_dir)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return run_dir


def _corrupted(run_dir: Path) -> Path:
    """Flip bytes in the middle of the array payload (the msgpack framing stays valid)."""
    path = _ckpt(run_dir)
    data = bytearray(path.read_bytes())
    state = msgpack.unpackb(bytes(data), raw=False)["state"]
    middle = data.find(state) + len(state) // 2
    for i in range(middle, middle + 8):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))
    return run_dir


def _random_file(run_dir: Path) -> Path:
    path = run_dir / "random.msgpack"
    path.write_bytes(random.Random(0).randbytes(4096))
    return path


def _newer_version(run_dir: Path) -> Path:
    path = _ckpt(run_dir)
    rewrite_checkpoint(path, path, lambda outer: outer.update(version=99))
    return run_dir


BAD_RESUMES = [
    pytest.param(_missing, ("--resume", "no such file"), id="missing-path"),
    pytest.param(_no_checkpoints, ("--resume", "no checkpoints"), id="dir-without-checkpoints"),
    pytest.param(_truncated, ("--resume", "truncated"), id="truncated"),
    pytest.param(_corrupted, ("corrupt",), id="corrupted"),
    pytest.param(_random_file, ("--resume", "checkpoint"), id="random-file"),
    pytest.param(_newer_version, ("--resume", "version 99", "newer"), id="newer-format-version"),
]


@pytest.mark.parametrize("make,needles", BAD_RESUMES)
def test_bad_resume_is_one_line_exit_2(tmp_path, cache, run_b, make, needles):
    _, snapshot, _ = run_b
    run_dir = tmp_path / "run"
    shutil.copytree(snapshot, run_dir)
    target = make(run_dir)
    metrics = (run_dir / "metrics.jsonl").read_bytes()
    config = (run_dir / "config.toml").read_bytes()
    result = rltui(["launch", "--no-ui", "--resume", target, "--set", f"total_timesteps={2 * K * STEPS}"],
                   tmp_path, cache, timeout=180)
    assert_one_line_error(result, *needles)
    # nothing lost: the run's files are as they were
    assert (run_dir / "metrics.jsonl").read_bytes() == metrics
    assert (run_dir / "config.toml").read_bytes() == config
    assert not (run_dir / "checkpoints").exists() or not temp_files(run_dir)
    # and the original checkpoint is still fine
    assert verify_checksum(_ckpt(snapshot))["update"] == K


def test_eval_refuses_checkpoint_for_another_network(tmp_path, cache, run_b):
    _, snapshot, _ = run_b
    foreign = tmp_path / "foreign.msgpack"
    rewrite_checkpoint(_ckpt(snapshot), foreign, _other_width)
    result = rltui(["eval", foreign, "--episodes", "4"], tmp_path, cache, timeout=180)
    line = assert_one_line_error(result, "does not fit")
    assert "16" in line and "32" in line, line


def _other_width(outer: dict) -> None:
    """Metadata saying hidden_sizes [32] over arrays of width 16, checksums made to match:
    a checkpoint of a network other than the one its config describes."""
    metadata = json.loads(outer["metadata"])
    metadata["config"]["hidden_sizes"] = [32]
    outer["metadata"] = json.dumps(metadata, sort_keys=True)
    if "sha256_all" in outer:
        from trainers.checkpoint import content_digest

        outer["sha256_all"] = content_digest(outer["version"], outer["metadata"], outer["sha256"])


def _foreign(run_dir: Path) -> Path:
    path = _ckpt(run_dir)
    rewrite_checkpoint(path, path, _other_width)
    return path


def tree(directory: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(directory)): p.read_bytes() if p.is_file() else None for p in directory.rglob("*")}


@pytest.mark.parametrize("target", ["file", "run-dir"])
def test_resume_refuses_checkpoint_for_another_network_and_writes_nothing(tmp_path, cache, run_b, target):
    """As `eval` does: one line, exit 2, before anything is written (no run files, no lock)."""
    _, snapshot, _ = run_b
    run_dir = tmp_path / "run"
    shutil.copytree(snapshot, run_dir)
    path = _foreign(run_dir)
    if target == "file":  # a lone file: its folder would become the run directory
        lone = tmp_path / "lone"
        lone.mkdir()
        path = Path(shutil.move(path, lone / "foreign.msgpack"))
        run_dir = lone
    before = tree(run_dir)
    result = rltui(["launch", "--no-ui", "--resume", path if target == "file" else run_dir,
                    "--set", f"total_timesteps={2 * K * STEPS}"], tmp_path, cache, timeout=180)
    line = assert_one_line_error(result, "--resume", "does not fit")
    assert "16" in line and "32" in line, line
    assert tree(run_dir) == before


def test_branch_from_an_older_checkpoint_sets_the_later_ones_aside(tmp_path, cache, run_a):
    """Issue 21, item 4: a resume from an older checkpoint starts a new history. Its run is
    left as a kill -9 after the branch's first checkpoints leaves it (the old branch's later
    checkpoints still ahead of the new branch's); `info RUN` and `--resume RUN` must then
    mean the new branch's latest, with its lr, and metrics, checkpoints and info agree."""
    run_dir = tmp_path / "S"
    first = rltui(
        ["launch", "--no-ui", "--run-dir", run_dir, *TINY, "--set", f"total_timesteps={2 * K * STEPS}",
         "--set", "checkpoint_every_updates=1", "--set", "chunk_seconds=0.01", "--set", "keep_checkpoints=50"],
        tmp_path, cache, timeout=300,
    )
    assert_ok(first)
    old = [u for u, _ in checkpoints(run_dir)]
    # the first chunk is a single update, and every chunk boundary saves
    assert old[0] == 1 and old[-1] == 2 * K and len(old) >= 3, old
    branch_end = 3
    assert branch_end < old[-1]
    log = tmp_path / "branch.txt"
    proc = start(
        ["launch", "--no-ui", "--resume", checkpoints(run_dir)[0][1], "--set", "lr=1e-3",
         "--set", f"total_timesteps={branch_end * STEPS}"],
        tmp_path, cache, log,
    )
    try:
        wait_for(
            lambda: (
                ("finished", branch_end) in [(e["kind"], e["update"]) for e in read_jsonl(run_dir / "events.jsonl")]
            ),
            proc,
            "the branch's end",
            log,
        )
        proc.send_signal(signal.SIGKILL)  # after its checkpoints are saved, as a crash would
        proc.wait(timeout=30)
    finally:
        stop(proc)
    assert "Traceback" not in log.read_text()
    new = [u for u, _ in checkpoints(run_dir)]
    assert new and new[0] == 1 and new[-1] == branch_end, new
    aside = run_dir / "checkpoints" / "discarded" / f"after-update-{1:09d}"
    assert sorted(int(CKPT_NAME.match(p.name).group(1)) for p in aside.iterdir()) == [u for u in old if u > 1]
    events = read_jsonl(run_dir / "events.jsonl")
    branched = [e for e in events if e["kind"] == "branched"]
    assert len(branched) == 1 and branched[0]["update"] == 1, branched
    assert branched[0]["data"]["checkpoints"] == [u for u in old if u > 1]
    assert "checkpoints/discarded/after-update-000000001" in branched[0]["message"]
    assert f"branched at update 1: checkpoints {', '.join(str(u) for u in old if u > 1)} moved" in log.read_text()
    assert [r["update"] for r in read_jsonl(run_dir / "metrics.discarded.jsonl")] == list(range(2, 2 * K + 1))
    assert updates(run_dir) == list(range(1, branch_end + 1))

    info = rltui(["info", run_dir], tmp_path, cache, timeout=120)
    assert_ok(info)
    fields = info_fields(info.stdout)
    assert fields["update"] == str(branch_end), info.stdout
    assert info_json(tmp_path, cache, run_dir)["hparams"]["lr"] == pytest.approx(1e-3)

    total = branch_end + 2
    resumed = rltui(["launch", "--no-ui", "--resume", run_dir, "--set", f"total_timesteps={total * STEPS}"],
                    tmp_path, cache, timeout=300)
    assert_ok(resumed)
    assert "branched" not in resumed.stderr  # nothing after the branch's latest to set aside
    records = read_jsonl(run_dir / "metrics.jsonl")
    assert [r["update"] for r in records] == list(range(1, total + 1))
    assert records[0]["lr"] == pytest.approx(2.5e-4, rel=1e-6)
    assert all(r["lr"] == pytest.approx(1e-3, rel=1e-6) for r in records[1:]), [r["lr"] for r in records]
    kinds = [(e["kind"], e["update"]) for e in read_jsonl(run_dir / "events.jsonl")]
    assert kinds.count(("resumed", branch_end)) == 1, kinds

    # A set-aside checkpoint is no longer the run's history: it may go on in a new directory only.
    stale = aside / f"checkpoint-{2 * K:09d}.msgpack"
    refused = rltui(["launch", "--no-ui", "--resume", stale, "--set", f"total_timesteps={4 * K * STEPS}"],
                    tmp_path, cache, timeout=120)
    assert_one_line_error(refused, "--resume", "--run-dir")
    assert updates(run_dir) == list(range(1, total + 1))


# --- 4. SIGTERM ---------------------------------------------------------------------------


def test_sigterm_checkpoints_exits_0_and_resumes(tmp_path, cache, run_a):
    run_dir = tmp_path / "run"
    log = tmp_path / "stderr.txt"
    proc = start(
        ["launch", "--no-ui", "--run-dir", run_dir, *TINY, "--set", "total_timesteps=2e6"], tmp_path, cache, log
    )
    try:
        wait_for(lambda: len(updates(run_dir)) >= 3, proc, "metrics", log)
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
    finally:
        stop(proc)
    stderr = log.read_text()
    assert code == 0, stderr[-3000:]
    assert "Traceback" not in stderr
    done = updates(run_dir)
    stopped_at = done[-1]
    assert done == list(range(1, stopped_at + 1))
    assert stopped_at < 2_000_000 // STEPS
    assert [u for u, _ in checkpoints(run_dir)] == [stopped_at]
    assert verify_checksum(_ckpt(run_dir))["update"] == stopped_at
    events = read_jsonl(run_dir / "events.jsonl")
    assert any(e["kind"] == "checkpoint" and e["update"] == stopped_at for e in events), events

    total = stopped_at + 3
    result = rltui(["launch", "--no-ui", "--resume", run_dir, "--set", f"total_timesteps={total * STEPS}"],
                   tmp_path, cache, timeout=300)
    assert_ok(result)
    records = read_jsonl(run_dir / "metrics.jsonl")
    assert records[stopped_at]["update"] == stopped_at + 1
    assert [r["update"] for r in records] == list(range(1, total + 1))


# --- 5. kill -9 at random moments -----------------------------------------------------------


def _kill9_cycles(tmp_path: Path, cache: Path, iterations: int, seed: int) -> None:
    rng = random.Random(seed)
    run_dir = tmp_path / "run"
    log = tmp_path / "stderr.txt"
    first = ["launch", "--no-ui", "--run-dir", run_dir, *TINY, "--set", "total_timesteps=2e6",
             "--set", "checkpoint_every_updates=1", "--set", "chunk_seconds=0.05", "--set", "keep_checkpoints=2"]
    resumed_from = None
    left_behind: set[str] = set()
    history = []
    for i in range(iterations + 1):
        final = i == iterations
        if resumed_from is None:
            args = first
        elif final:
            args = ["launch", "--no-ui", "--resume", run_dir, "--set", f"total_timesteps={(resumed_from + 3) * STEPS}"]
        else:
            args = ["launch", "--no-ui", "--resume", run_dir]
        proc = start(args, tmp_path, cache, log)
        try:
            if resumed_from is not None:
                def resumed(n=i):
                    return sum(e["kind"] == "resumed" for e in read_jsonl(run_dir / "events.jsonl")) >= n

                wait_for(resumed, proc, f"resume #{i}", log)
                last = [e for e in read_jsonl(run_dir / "events.jsonl") if e["kind"] == "resumed"][-1]
                assert last["update"] == resumed_from, (history, last)
                survivors = left_behind & temp_files(run_dir)
                assert not survivors, f"stale temp files survived a resume start: {survivors} ({history})"
            if final:
                code = proc.wait(timeout=300)
                assert code == 0, log.read_text()[-3000:]
                break
            floor = resumed_from or 0
            wait_for(lambda: any(u > floor for u, _ in checkpoints(run_dir)), proc, "a new checkpoint", log)
            delay = rng.uniform(0, 0.5)
            time.sleep(delay)
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        finally:
            stop(proc)
        found = checkpoints(run_dir)
        assert found, history
        latest_update, latest = found[-1]
        history.append((i, round(delay, 3), latest_update, sorted(temp_files(run_dir))))
        assert verify_checksum(latest)["update"] == latest_update, history
        info = rltui(["info", run_dir], tmp_path, cache, timeout=120)
        assert info.returncode == 0, (history, info.stderr[-2000:])
        assert info_fields(info.stdout)["update"] == str(latest_update), info.stdout
        # an interrupted save leaves a temp file at most; plant one more to be sure cleanup runs
        (run_dir / "checkpoints" / ".tmp-checkpoint-planted").write_bytes(b"half a checkpoint")
        left_behind = temp_files(run_dir)
        resumed_from = latest_update
    assert not temp_files(run_dir)
    total = resumed_from + 3
    got = updates(run_dir)
    assert got == list(range(1, total + 1)), (history, got)
    assert checkpoints(run_dir)[-1][0] == total


# The default suite's kill -9 test is test_kill_resume.py's: three kills, one inside a save,
# and the resumed run compared with an uninterrupted one.
@pytest.mark.slow
def test_kill9_at_random_moments_many_times(tmp_path, cache, run_a):
    _kill9_cycles(tmp_path, cache, iterations=25, seed=int(time.time()))


# --- 6. info and eval -----------------------------------------------------------------------


def test_info_prints_metadata(work, cache, run_a):
    result = rltui(["info", run_a], work, cache, timeout=120)
    assert_ok(result)
    fields = info_fields(result.stdout)
    assert fields["checkpoint"].endswith(f"checkpoint-{2 * K:09d}.msgpack")
    assert fields["update"] == str(2 * K)
    assert fields["env_steps"] == f"{2 * K * STEPS:,}"
    assert fields["device"] == "cpu x 1"
    assert fields["trainer"] == "ppo"
    assert re.fullmatch(r"\d+:\d\d:\d\d \([\d,.]+ s\)", fields["elapsed"]), fields["elapsed"]  # with units
    # sections, not JSON blobs; only what applies to PPO; nothing internal
    assert "hyperparameters (when saved, live edits included)" in result.stdout and "{" not in result.stdout
    assert "baseline" not in result.stdout and "max_chunk_updates" not in result.stdout
    record = info_json(work, cache, run_a)
    assert record["update"] == 2 * K and record["env_steps"] == 2 * K * STEPS and record["device_kind"] == "cpu"
    versions = record["versions"]
    for name in ("jax", "flax", "optax", "gymnax"):
        assert re.match(r"\d+\.\d+", versions.get(name, "")), (name, versions)
    hparams = record["hparams"]
    assert hparams["lr"] == pytest.approx(2.5e-4) and hparams["gamma"] == pytest.approx(0.99)
    # the live-editable keys as config values; anneal_lr (static) is in the config, and
    # anneal_updates is internal (derived from total_timesteps)
    assert "anneal_lr" not in hparams and "anneal_updates" not in hparams
    config = record["config"]
    assert config["hidden_sizes"] == [16] and config["num_envs"] == 4
    assert "baseline" not in config and "normalize_returns" not in config  # REINFORCE's
    # CartPole's actions are discrete: the keys of continuous policies do not apply
    assert fields["actions"] == "discrete" and record["actions"] == "discrete"
    assert "log_std" not in config and "log_std_init" not in config and "log_std" not in result.stdout


@pytest.mark.parametrize("sample", [False, True], ids=["greedy", "sampled"])
def test_eval_prints_return_statistics(work, cache, run_a, sample):
    result = rltui(["eval", run_a, "--episodes", "4", *(["--sample"] if sample else [])], work, cache, timeout=180)
    assert_ok(result)
    stats = eval_stats(result.stdout)
    assert stats["min"] <= stats["mean"] <= stats["max"], stats
    assert stats["std"] >= 0 and stats["min"] >= 1  # CartPole: +1 per step, at least one step
    assert ("sampled" if sample else "greedy") in result.stdout
    assert "4 episodes" in result.stdout and f"update {2 * K}" in result.stdout


def test_eval_zero_episodes_exits_2(work, cache, run_a):
    result = rltui(["eval", run_a, "--episodes", "0"], work, cache, timeout=60)
    assert_one_line_error(result, "--episodes")


# --- 7. NaN guard ---------------------------------------------------------------------------


@pytest.mark.parametrize("overrides", [
    # Adam with an absurd step: the parameters themselves become NaN
    pytest.param(["lr=1e30", "max_grad_norm=1e30"], id="nan-params"),
    # the gradient norm overflows to inf; clipping then zeroes the step, so the
    # parameters stay finite, but the guard must still treat the update as diverged
    pytest.param(["vf_coef=1e30"], id="inf-grad-norm"),
])
def test_nonfinite_exits_3_and_keeps_last_good_checkpoint(tmp_path, cache, run_a, overrides):
    run_dir = tmp_path / "run"
    shutil.copytree(run_a, run_dir)
    good = 2 * K
    sets = [x for o in overrides for x in ("--set", o)]
    result = rltui(
        ["launch", "--no-ui", "--resume", run_dir, *sets, "--set", "keep_checkpoints=1",
         "--set", f"total_timesteps={(good + 4) * STEPS}"],
        tmp_path, cache, timeout=300,
    )
    assert result.returncode == 3, result.stderr[-3000:]
    assert "diverged" in result.stderr.lower(), result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    records = read_jsonl(run_dir / "metrics.jsonl")
    bad = [r["update"] for r in records if any(r[f] is None or not math.isfinite(r[f]) for f in GUARDED)]
    assert bad, "no non-finite update was reached"
    last_finite = bad[0] - 1
    assert last_finite == good
    found = checkpoints(run_dir)
    assert found and found[-1][0] <= last_finite, (
        f"checkpoint written after the divergence at update {bad[0]}: {[p.name for _, p in found]}"
    )
    assert (run_dir / "checkpoints" / f"checkpoint-{good:09d}.msgpack").exists(), "the last good checkpoint is gone"
    import numpy as np
    from flax import serialization

    for _, path in found:
        outer = msgpack.unpackb(path.read_bytes(), raw=False)
        state = serialization.msgpack_restore(outer["state"])
        leaves = []

        def walk(node):
            if isinstance(node, dict):
                for child in node.values():
                    walk(child)
            else:
                leaves.append(np.asarray(node))

        walk(state)
        assert all(np.isfinite(x).all() for x in leaves if x.dtype.kind == "f"), path.name
    evaluated = rltui(["eval", run_dir, "--episodes", "4"], tmp_path, cache, timeout=180)
    assert_ok(evaluated)
    eval_stats(evaluated.stdout)
