"""What a logger costs: training SPS with `loggers = [NAME]` against without, in one process.

Runs alternate, A (no logger) then B (the logger), --repeats times, on the same config, so a
shared machine's swings fall on both alike; each run's SPS is taken from its metrics.jsonl
between its first and last records (compilation excluded), at the default chunk length.
The figure is the ratio of the median SPS, B / A, and each pair's own ratio. On a shared
machine SPS swings by tens of percent between runs, so the benchmark also times the logger
itself (its listener's calls, on the session thread, where they hold up training) as a
share of each B run's wall time: a figure that load hardly moves.

    python benchmarks/loggers.py [--logger tensorboard] [--env-steps 1500000] [--repeats 3] [--env CartPole-v1]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def run_sps(run_dir: Path) -> float:
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    first, last = records[0], records[-1]
    return (last["env_steps"] - first["env_steps"]) / (last["wall_time"] - first["wall_time"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--logger", default="tensorboard", choices=["tensorboard", "wandb"])
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--env-steps", type=float, default=1_500_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if args.logger == "wandb":
        os.environ.setdefault("WANDB_MODE", "offline")  # never the network from a benchmark
        os.environ.setdefault("WANDB_SILENT", "true")

    import time

    import rltui
    from rltui.loggers import listener

    spent = [0.0]

    def timed(method):
        def wrapper(self, *a):
            started = time.perf_counter()
            try:
                return method(self, *a)
            finally:
                spent[0] += time.perf_counter() - started
        return wrapper

    for name in ("on_metrics", "on_event", "on_state"):
        setattr(listener.LoggerListener, name, timed(getattr(listener.LoggerListener, name)))

    root = Path(tempfile.mkdtemp(prefix="rltui-loggers-"))
    # One untimed run first: the compile, and the first execution's one-off costs.
    rltui.train(env=args.env, total_timesteps=int(args.env_steps) // 4, run_dir=root / "warmup", progress=False)
    sps: dict[str, list[float]] = {"none": [], args.logger: []}
    shares: list[float] = []
    for i in range(args.repeats):
        for label, names in (("none", ()), (args.logger, (args.logger,))):
            run_dir = root / f"{label}-{i}"
            spent[0], started = 0.0, time.perf_counter()
            result = rltui.train(env=args.env, total_timesteps=int(args.env_steps), loggers=names,
                                 run_dir=run_dir, progress=False)
            assert result.error is None, result.error
            sps[label].append(run_sps(run_dir))
            note = ""
            if names:
                shares.append(spent[0] / (time.perf_counter() - started))
                note = f"  (logger: {100 * shares[-1]:.2f}% of the run's wall time)"
            print(f"round {i + 1} {label:>12}: {sps[label][-1]:>12,.0f} SPS{note}", flush=True)
    a, b = statistics.median(sps["none"]), statistics.median(sps[args.logger])
    pairs = [y / x for x, y in zip(sps["none"], sps[args.logger])]
    print(f"median SPS without a logger {a:,.0f}, with {args.logger} {b:,.0f}: ratio {b / a:.3f} "
          f"(per round: {', '.join(f'{p:.3f}' for p in pairs)})")
    print(f"time in the logger: median {100 * statistics.median(shares):.2f}% of the run's wall time "
          f"(per round: {', '.join(f'{100 * x:.2f}%' for x in shares)})")
    print(f"run directories: {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
