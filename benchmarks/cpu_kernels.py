"""A gradient step of each reference's network under XLA's CPU options: how much of an
update the compiler's matmul kernels decide, whichever trainer calls them.

Each shape is a plain MLP at a reference configuration's batch (DQN's Q-network on
CartPole, 128 rows; SAC's critic and actor on Pendulum, 256 rows; PQN's Q-network at 4 envs,
16 rows), one step a forward pass, the backward pass of a squared loss and an SGD step, in a
`fori_loop` of `--steps` steps. Each option set runs in a process of its own (XLA reads its
flags once per process), with rltui's process setup (`runtime.configure_jax`, one XLA
worker); `--transposed` adds a variant whose Dense layers lay the input out transposed for
the weight gradient (behind `optimization_barrier`, so that XLA does not fold it back),
which lets YNNPACK take that matmul. Figures are µs per step, CPU time, the median of
`--rounds` rounds; compare within one run only.

    python benchmarks/cpu_kernels.py [--steps 2000] [--rounds 7] [--transposed]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# name: (rows, layer sizes)
SHAPES = {
    "dqn": (128, (4, 120, 84, 2)),
    "sac-critic": (256, (4, 64, 64, 1)),
    "sac-actor": (256, (3, 64, 64, 2)),
    "pqn-4": (16, (4, 256, 256, 2)),
}

OPTIONS = (
    "",
    "--xla_cpu_use_onednn=true",
    "--xla_cpu_experimental_onednn_fusion_type=dot",
    "--xla_cpu_experimental_xnn_fusion_type=dot",
    "--xla_cpu_experimental_ynn_fusion_type=dot",
    "--xla_cpu_experimental_ynn_fusion_type=individual_dot",
    "--xla_cpu_use_xnnpack=true",
    "--xla_cpu_multi_thread_eigen=false",
    "--xla_cpu_enable_fast_math=true",
    "--xla_cpu_experimental_ynn_fusion_type=",  # YNNPACK off: XLA's own kernels
)


def measure(args) -> dict[str, float]:
    """µs per gradient step of each shape (and variant), in this process."""
    sys.path.insert(0, str(ROOT))
    from rltui.infra import runtime

    runtime.configure_jax(host_devices=1, compile_cache=False)
    runtime.start_backend(1)
    import jax
    import jax.numpy as jnp

    def dense(x, w, b):
        return x @ w + b

    @jax.custom_vjp
    def dense_transposed(x, w, b):
        return x @ w + b

    def forward(x, w, b):
        return x @ w + b, (x, w)

    def backward(saved, g):
        x, w = saved
        x_t = jax.lax.optimization_barrier(jnp.transpose(x))
        return g @ w.T, x_t @ g, g.sum(0)

    dense_transposed.defvjp(forward, backward)

    def timed(layer, rows: int, sizes: tuple[int, ...]) -> float:
        key = jax.random.PRNGKey(0)
        params = []
        for fan_in, fan_out in zip(sizes, sizes[1:]):
            key, sub = jax.random.split(key)
            params.append((jax.random.normal(sub, (fan_in, fan_out)) * 0.1, jnp.zeros(fan_out)))
        x = jax.random.normal(key, (rows, sizes[0]))
        y = jax.random.normal(jax.random.fold_in(key, 1), (rows, sizes[-1]))

        def loss(params, x):
            h = x
            for i, (w, b) in enumerate(params):
                h = layer(h, w, b)
                h = jax.nn.relu(h) if i < len(params) - 1 else h
            return jnp.mean((h - y) ** 2)

        @jax.jit
        def steps(params):
            def body(i, p):
                grads = jax.grad(loss)(p, x + i.astype(jnp.float32) * 1e-6)
                return jax.tree.map(lambda a, g: a - 1e-4 * g, p, grads)
            return jax.lax.fori_loop(0, args.steps, body, params)

        jax.block_until_ready(steps(params))
        seconds = []
        for _ in range(args.rounds):
            started = time.process_time()
            jax.block_until_ready(steps(params))
            seconds.append(time.process_time() - started)
        return statistics.median(seconds) / args.steps * 1e6

    out = {}
    for name, (rows, sizes) in SHAPES.items():
        out[name] = timed(dense, rows, sizes)
        if args.transposed:
            out[f"{name}, transposed"] = timed(dense_transposed, rows, sizes)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=2000, help="gradient steps per round (2000)")
    parser.add_argument("--rounds", type=int, default=7, help="timed rounds, the median counts (7)")
    parser.add_argument("--transposed", action="store_true", help="also the transposed weight-gradient variant")
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print("RESULT " + json.dumps(measure(args)), flush=True)
        return
    rows = {}
    for option in OPTIONS:
        env = {**os.environ, "XLA_FLAGS": option}
        command = [sys.executable, __file__, "--measure", "--steps", str(args.steps), "--rounds", str(args.rounds),
                   *(["--transposed"] if args.transposed and not option else [])]
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
        line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
        if line is None:
            print(f"{option or 'default'}: failed: {done.stderr.strip().splitlines()[-1:]}", flush=True)
            continue
        rows[option or "default"] = json.loads(line[len("RESULT "):])
        print(f"{option or 'default'}: " + ", ".join(f"{k} {v:.1f}" for k, v in rows[option or "default"].items()),
              flush=True)
    columns = list(rows.get("default", next(iter(rows.values()), {})))
    print("\n| XLA_FLAGS | " + " | ".join(columns) + " |")
    print("|---" * (len(columns) + 1) + "|")
    for option, figures in rows.items():
        print(f"| `{option}` | " + " | ".join(f"{figures[c]:.1f}" if c in figures else "-" for c in columns) + " |")


if __name__ == "__main__":
    main()
