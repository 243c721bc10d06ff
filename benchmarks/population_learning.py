"""What a population learns on CartPole-v1, run as a user runs it (`rltui launch --no-ui`):

  sweep  eight learning rates from 1e-5 to 1e-1, two seeds each, the default budget
         (500k env steps per agent): the final greedy evaluation return of each member.
  pbt    eight members, one at the default lr (2.5e-4) and seven at a bad one (--bad-lr),
         with and without population-based training (every 20 updates, the bottom quarter
         replaced by perturbed clones of the top quarter): each member's final greedy
         evaluation return, and how many updates the population took until every member
         that trains evaluates at the default's return.

Every figure comes from the run's own files (metrics.jsonl's "members", population.jsonl).

    python benchmarks/population_learning.py [--which sweep pbt] [--timesteps 500000] [--bad-lr 0.05]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SWEEP_LRS = (1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 1e-1)


def launch(run_dir: Path, *items: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "rltui", "launch", "--no-ui", "--run-dir", str(run_dir), *items],
                   check=True, capture_output=True, text=True)
    return time.perf_counter() - start


def records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def member_evals(run_dir: Path) -> list[float | None]:
    """Each member's return at the run's last evaluation."""
    evaluated = [r for r in records(run_dir) if r.get("members", {}).get("eval_return")]
    return evaluated[-1]["members"]["eval_return"]


def fmt(values) -> str:
    return "  ".join("—" if v is None else f"{v:6.1f}" for v in values)


def sweep(args, root: Path) -> None:
    run_dir = root / "sweep"
    updates = args.timesteps // 512
    seconds = launch(run_dir, "--sweep", "lr=[" + ",".join(f"{lr:g}" for lr in SWEEP_LRS) + "]",
                     "--set", "num_seeds=2", "--set", f"total_timesteps={args.timesteps}",
                     "--set", f"eval_every_updates={updates // 4}", "--set", "eval_episodes=32")
    print(f"lr sweep, 8 members x 2 seeds, {args.timesteps:,} env steps each, {seconds:.0f} s for the whole run")
    evals = [r for r in records(run_dir) if r.get("members", {}).get("eval_return")]
    print(f"{'lr':>8}  " + "  ".join(f"{'u' + str(r['update']):>6}" for r in evals))
    for m, lr in enumerate(SWEEP_LRS):
        print(f"{lr:>8g}  " + fmt(r["members"]["eval_return"][m] for r in evals))


def pbt(args, root: Path) -> None:
    lrs = [2.5e-4] + [args.bad_lr * (1 + i / 100) for i in range(7)]  # distinct values: a grid of one key
    common = ["--sweep", "lr=[" + ",".join(f"{lr:g}" for lr in lrs) + "]", "--set", f"total_timesteps={args.timesteps}",
              "--set", "eval_every_updates=20", "--set", "eval_episodes=16"]
    for label, extra in (("without PBT", []),
                         ("with PBT", ["--set", "pbt_every_updates=20", "--set", "pbt_fraction=0.25",
                                       "--set", "pbt_metric=eval_return"])):
        run_dir = root / label.replace(" ", "-")
        seconds = launch(run_dir, *common, *extra)
        final = member_evals(run_dir)
        default = final[0]
        solved_at = next((r["update"] for r in records(run_dir)
                          if r.get("members", {}).get("eval_return")
                          and all(v is not None and v >= 500 for v in r["members"]["eval_return"])), None)
        steps = (run_dir / "population.jsonl").read_text().splitlines()
        replacements = sum(len(json.loads(s).get("replacements", [])) for s in steps)
        print(f"{label}: lr {lrs[0]:g} for member 0, {args.bad_lr:g}.. for 1-7; {seconds:.0f} s; "
              f"{replacements} replacements")
        print(f"  final eval return per member: {fmt(final)}; member 0 (default lr) {default}")
        print("  every member at 500 from update: " + ("never" if solved_at is None else str(solved_at)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--which", nargs="+", default=["sweep", "pbt"], choices=["sweep", "pbt"])
    parser.add_argument("--timesteps", type=int, default=500_000)
    parser.add_argument("--bad-lr", type=float, default=0.05)
    parser.add_argument("--keep", metavar="DIR", help="keep the run directories here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.keep or tmp)
        for which in args.which:
            {"sweep": sweep, "pbt": pbt}[which](args, root)


if __name__ == "__main__":
    main()
