"""Total env steps per second of program variants against a baseline, in one run:

  precision  fp32 (baseline) against bf16 matmuls, 4 envs
  seeds      1 seed x 4 envs (baseline) against 8 seeds x 4 envs vmapped in one program
             (total SPS counts every agent's steps)

Each figure runs chunks through `DataParallel.run_chunk`, as the session does, excludes
compilation, and is the median of --repeats interleaved runs; the ratio is per run, so
machine load drift hits both sides alike.

    python benchmarks/variants.py [--env-steps 2e5] [--repeats 3]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def measurer(static, env_steps: float):
    """A function timing `updates` updates of `static` (all seeds), compile excluded."""
    import jax

    from trainers import parallel as data_parallel
    from trainers.hparams import DynamicHParams

    updates = max(1, int(env_steps // static.steps_per_update))
    total_steps = updates * static.steps_per_update * static.num_seeds
    hp = DynamicHParams.create(anneal_updates=updates)
    parallel = data_parallel.build(static, jax.local_devices()[:1])
    # Wait for each init before anything else runs: two programs executing at once on a
    # 2-core CPU client have been seen to deadlock (both waiting on the shared thread pool).
    parallel.compile(jax.block_until_ready(parallel.init(parallel.seed_keys(0), hp)), hp)

    def measure() -> float:
        state = jax.block_until_ready(parallel.init(parallel.seed_keys(0), hp))
        start, done = time.perf_counter(), 0
        while done < updates:
            count = min(static.max_chunk_updates, updates - done)
            state, _ = parallel.run_chunk(state, hp, count)  # host metrics: synchronous
            done += count
        return total_steps / (time.perf_counter() - start)

    measure.devices = parallel.num_devices
    return measure


def compare(name: str, baseline, variant, env_steps: float, repeats: int) -> None:
    import numpy as np
    from harness import fmt

    base, other = measurer(baseline, env_steps), measurer(variant, env_steps)
    results = {"base": [], "other": []}
    for _ in range(repeats):
        results["base"].append(base())
        results["other"].append(other())
    ratios = [o / b for b, o in zip(results["base"], results["other"])]
    stats = {k: {"median": float(np.median(v)), "min": min(v), "max": max(v)} for k, v in results.items()}
    print(f"\n{name}:")
    print(f"  devices: baseline {base.devices}, variant {other.devices}")
    print(f"  baseline  {fmt(stats['base'], ' SPS')}")
    print(f"  variant   {fmt(stats['other'], ' SPS')}")
    print(f"  variant/baseline median {np.median(ratios):.3f}  (per run: {', '.join(f'{r:.3f}' for r in ratios)})")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env-steps", type=float, default=2e5, help="env steps per agent per measurement")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", choices=("precision", "seeds"), help="run one comparison")
    args = parser.parse_args(argv)

    import jax

    from trainers.hparams import StaticConfig

    print(f"jax {jax.__version__}, {jax.local_devices()[0].platform}, {os.cpu_count()} cores")
    fp32 = StaticConfig(env_id="CartPole-v1", num_envs=4, num_steps=128, max_chunk_updates=64)
    if args.only in (None, "precision"):
        bf16 = dataclasses.replace(fp32, precision="bf16")
        compare("precision: fp32 -> bf16, CartPole-v1, 4 envs x 128", fp32, bf16, args.env_steps, args.repeats)
    if args.only in (None, "seeds"):
        seeds = dataclasses.replace(fp32, num_seeds=8)
        compare(
            "seeds: 1 -> 8 seeds x 4 envs x 128, CartPole-v1 (total SPS)", fp32, seeds, args.env_steps, args.repeats
        )


if __name__ == "__main__":
    main()
