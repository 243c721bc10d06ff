"""What evaluation during training costs: the share of a run's wall time spent evaluating,
on CartPole-v1 with the default configuration, as `rltui launch --no-ui` runs it.

Two headless runs of the same config, one with eval_every_updates=0 and one with
--eval-every (default 10) and the default eval_episodes; the cost is
(wall with evaluation - wall without) / wall with evaluation, measured from the first
update to the last (compile excluded: the evaluation compiles with the trainer). The
runs alternate --repeats times; the median share is printed.

    python benchmarks/eval_cost.py [--eval-every 10] [--timesteps 200000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def training_seconds(run_dir: Path) -> float:
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return records[-1]["wall_time"] - records[0]["wall_time"]


def run(work: Path, name: str, timesteps: int, eval_every: int) -> float:
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=str(REPO))
    args = [sys.executable, "-m", "rltui", "launch", "--no-ui", "--run-dir", str(work / name),
            "--set", f"total_timesteps={timesteps}", "--set", f"eval_every_updates={eval_every}",
            "--set", "checkpoint_minutes=0"]
    subprocess.run(args, env=env, check=True, capture_output=True)
    return training_seconds(work / name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--eval-every", type=int, default=10)
    parser.add_argument("--timesteps", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    shares = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for i in range(args.repeats):
            off = run(work, f"off-{i}", args.timesteps, 0)
            on = run(work, f"on-{i}", args.timesteps, args.eval_every)
            share = (on - off) / on
            shares.append(share)
            print(f"round {i + 1}: without {off:.2f} s, with evaluation every {args.eval_every} updates {on:.2f} s, "
                  f"share {share:+.1%}", flush=True)
    print(f"evaluation's share of wall time (median of {len(shares)}): {statistics.median(shares):+.1%}")


if __name__ == "__main__":
    main()
