"""The cost of rltui's suite adapters: env steps per second of one env of each installed
suite at 64 envs, stepped by the suite's own API in a bare `jax.lax.scan` (random actions,
the suite's own reset) and through rltui's wrapped env (adapter, reset, flattening,
episode statistics), and their ratio.

    python benchmarks/env_wrappers.py [--steps 1000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import importlib.util
import time

import jax

ENVS = {"navix": "navix:Navix-Empty-5x5-v0", "craftax": "craftax:Craftax-Classic-Symbolic-v1"}


def bare_navix(num_actions: int):
    import navix

    env = navix.make("Navix-Empty-5x5-v0")

    def init(key):
        return jax.vmap(env.reset)(jax.random.split(key, 64))

    def step(state, key):
        action = jax.random.randint(key, (64,), 0, num_actions)
        return jax.vmap(env.step)(state, action)  # navix resets by itself

    return init, step


def bare_craftax(num_actions: int):
    from craftax.craftax_env import make_craftax_env_from_name

    env = make_craftax_env_from_name("Craftax-Classic-Symbolic-v1", auto_reset=True)
    params = env.default_params

    def init(key):
        return jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(key, 64), params)[1]

    def step(state, key):
        keys = jax.random.split(key, 65)
        action = jax.random.randint(keys[0], (64,), 0, num_actions)
        return jax.vmap(env.step, in_axes=(0, 0, 0, None))(keys[1:], state, action, params)[1]

    return init, step


def wrapped(env_id: str):
    from trainers.envs import make_env

    spec = make_env(env_id)

    def init(key):
        return jax.vmap(spec.env.reset, in_axes=(0, None))(jax.random.split(key, 64), spec.params)[1]

    def step(state, key):
        keys = jax.random.split(key, 65)
        action = jax.random.randint(keys[0], (64,), 0, spec.num_actions)
        return jax.vmap(spec.env.step, in_axes=(0, 0, 0, None))(keys[1:], state, action, spec.params)[1]

    return init, step, spec.num_actions


def steps_per_second(init, step, steps: int, repeats: int) -> float:
    def run(key):
        state = init(key)
        state, _ = jax.lax.scan(lambda s, k: (step(s, k), None), state, jax.random.split(key, steps))
        return state

    run = jax.jit(run)
    jax.block_until_ready(run(jax.random.PRNGKey(0)))  # compile
    best = float("inf")
    for i in range(repeats):
        started = time.perf_counter()
        jax.block_until_ready(run(jax.random.PRNGKey(i + 1)))
        best = min(best, time.perf_counter() - started)
    return 64 * steps / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"{'env':<38} {'bare steps/s':>14} {'rltui steps/s':>14} {'ratio':>6}")
    for suite, env_id in ENVS.items():
        if importlib.util.find_spec(suite) is None:
            print(f'{env_id:<38} not installed (pip install "rltui[{suite}]")')
            continue
        w_init, w_step, n = wrapped(env_id)
        bare = {"navix": bare_navix, "craftax": bare_craftax}[suite](n)
        b = steps_per_second(*bare, args.steps, args.repeats)
        w = steps_per_second(w_init, w_step, args.steps, args.repeats)
        print(f"{env_id:<38} {b:>14,.0f} {w:>14,.0f} {b / w:>6.2f}")


if __name__ == "__main__":
    main()
