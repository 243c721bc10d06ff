"""What checkpoints cost: the time a save holds training up (the state fetched from the
device, encoded, checksummed, written and fsynced), and the share of wall time that gives
at the default cadence (`checkpoint_minutes` = 1: one save a minute, the first after 10 s).

Each case is a headless run of CartPole-v1 (SAC's: Pendulum-v1) (`rltui launch --no-ui`, defaults otherwise) in
a process of its own, saving every few seconds (`checkpoint_minutes` = 0.05) so that a short
run gives several samples, stopped with SIGTERM after --seconds of training. Each save's own
duration is the `seconds` of its `checkpoint` event in events.jsonl. Printed per case: the
median save, the share of the run's training time spent saving at that sampling cadence, and
the share at the default cadence (median save / 60 s; the first minute holds two saves, so
its share is twice that, over 70 s).

    python benchmarks/checkpoint_cost.py [--seconds 20] [--cases 4 4096 sweep64 dqn-1M sac-1M dqn-1M-filling]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rltui.runfiles.reader import read_jsonl

REPO = Path(__file__).resolve().parents[1]
DEFAULT_INTERVAL = 60.0  # seconds between saves at the default cadence
SAMPLE_MINUTES = 0.05  # every 3 s, for samples

CASES = {
    "4": ["--set", "num_envs=4"],
    "4096": ["--set", "num_envs=4096"],
    "sweep64": ["--set", "num_envs=4", "--sweep", "lr=loguniform(1e-4,1e-2)", "--sweep-size", "64"],
    # A replay buffer of a million transitions with replay_in_checkpoint left on, filled in
    # the run's first seconds (1,000 envs, a gradient step an update): every save after that
    # holds the whole buffer.
    "dqn-1M": ["--set", "algo=dqn", "--set", "buffer_size=1000000", "--set", "num_envs=1000",
               "--set", "replay_ratio=0.001"],
    "sac-1M": ["--set", "algo=sac", "--set", "env=Pendulum-v1", "--set", "buffer_size=1000000",
               "--set", "num_envs=1000", "--set", "replay_ratio=0.001"],
    # The same buffer at DQN's defaults (10 envs), which fill a few percent of it in the run:
    # a checkpoint holds the filled rows only.
    "dqn-1M-filling": ["--set", "algo=dqn", "--set", "buffer_size=1000000"],
}
LABELS = {"sweep64": "64 members x 4 envs", "dqn-1M": "DQN, 1M-transition buffer, full",
          "sac-1M": "SAC, 1M-transition buffer, full", "dqn-1M-filling": "DQN, 1M-transition buffer, filling"}


def run_case(work: Path, name: str, seconds: float) -> dict:
    run_dir = work / name
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=str(REPO))
    args = [sys.executable, "-m", "rltui", "launch", "--no-ui", "--run-dir", str(run_dir), *CASES[name],
            "--set", "total_timesteps=2000000000", "--set", f"checkpoint_minutes={SAMPLE_MINUTES}"]
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        while not read_jsonl(run_dir / "metrics.jsonl", []):  # the compile is not part of the run's time
            if proc.poll() is not None:
                raise RuntimeError(f"{name}: the run ended before training: {proc.stderr.read().decode()[-2000:]}")
            time.sleep(0.2)
        time.sleep(seconds)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    records = read_jsonl(run_dir / "metrics.jsonl", [])
    training = records[-1]["wall_time"] - records[0]["wall_time"]
    saves = [e for e in read_jsonl(run_dir / "events.jsonl", []) if e["kind"] == "checkpoint"]
    periodic = [e["data"]["seconds"] for e in saves if e["data"].get("reason") == "periodic"]
    if not periodic:
        raise RuntimeError(f"{name}: no periodic checkpoint in {training:.1f} s; use more --seconds")
    size = max(p.stat().st_size for p in (run_dir / "checkpoints").glob("checkpoint-*.msgpack"))
    fill = records[-1].get("buffer_fill")
    return {"saves": len(periodic), "median": statistics.median(periodic), "max": max(periodic),
            "share": sum(periodic) / training, "training": training, "bytes": size,
            "env_steps": records[-1]["env_steps"], "fill": fill}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="training seconds per case")
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.cases:
            r = run_case(Path(tmp), name, args.seconds)
            label = LABELS.get(name, f"{name} envs")
            print(f"{label:>26}: checkpoint {r['bytes'] / 1e6:.2f} MB; save median {r['median'] * 1e3:.1f} ms "
                  f"(max {r['max'] * 1e3:.1f}, {r['saves']} saves in {r['training']:.1f} s); share every "
                  f"{SAMPLE_MINUTES * 60:.0f} s {r['share']:.2%}; at the default cadence "
                  f"{r['median'] / DEFAULT_INTERVAL:.3%}"
                  + (f"; buffer {r['fill']:.1%} full at the end" if r["fill"] is not None else ""), flush=True)


if __name__ == "__main__":
    main()
