"""The cost of rltui's suite adapters: env steps per second of one env of each installed
suite at 64 envs, stepped by the suite's own API in a bare `jax.lax.scan` (random actions,
the suite's own reset) and through rltui's wrapped env as a rollout steps it (adapter,
reset, flattening, episode statistics; the steps split into rollouts of `--rollout-steps`,
each drawing its restart states first), and their ratio.

    python benchmarks/env_wrappers.py [--steps 1000] [--repeats 3] [--rollout-steps 128] [--suites navix,brax]
"""

from __future__ import annotations

import argparse
import importlib.util
import time

import jax

ENVS = {
    "navix": "navix:Navix-Empty-5x5-v0",
    "craftax": "craftax:Craftax-Classic-Symbolic-v1",
    "jumanji": "jumanji:Snake-v1",
    "brax": "brax:inverted_pendulum",
}


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


def bare_jumanji(num_actions: int):
    import jumanji
    from jumanji.wrappers import AutoResetWrapper

    env = AutoResetWrapper(jumanji.make("Snake-v1"))

    def init(key):
        return jax.vmap(env.reset)(jax.random.split(key, 64))[0]

    def step(state, key):
        action = jax.random.randint(key, (64,), 0, num_actions)
        return jax.vmap(env.step)(state, action)[0]

    return init, step


def bare_brax(num_actions: int):
    from trainers.suites.brax import EPISODE_LENGTH, _brax_envs

    envs = _brax_envs()  # imported quietly, as the adapter does
    from brax.envs.wrappers.training import AutoResetWrapper, EpisodeWrapper, VmapWrapper

    # Brax's own training stack; its auto-reset returns to the episode's first state
    # rather than drawing a new one.
    env = AutoResetWrapper(VmapWrapper(EpisodeWrapper(envs.get_environment("inverted_pendulum"), EPISODE_LENGTH, 1)))

    def init(key):
        return env.reset(jax.random.split(key, 64))

    def step(state, key):
        return env.step(state, random_actions(key, False, num_actions))

    return init, step


BARE = {"navix": bare_navix, "craftax": bare_craftax, "jumanji": bare_jumanji, "brax": bare_brax}


def random_actions(key, discrete: bool, num_actions: int):
    """64 uniform actions: indices below `num_actions`, or vectors in [-1, 1]."""
    if discrete:
        return jax.random.randint(key, (64,), 0, num_actions)
    return jax.random.uniform(key, (64, num_actions), minval=-1.0, maxval=1.0)


def wrapped(env_id: str, rollout_steps: int):
    """rltui's wrapped env, stepped as `trainers.rollout` steps it: each rollout's step
    inputs (keys, the rollout's restart draws) made before its time loop."""
    from trainers.envs import make_env
    from trainers.rollout import restart_inputs, step_envs

    spec = make_env(env_id)

    def init(key):
        return jax.vmap(spec.env.reset, in_axes=(0, None))(jax.random.split(key, 64), spec.params)[1]

    def one_rollout(state, key, length):
        action_key, step_key, restart_key = jax.random.split(key, 3)
        inputs = jax.random.split(step_key, (length, 64))
        if spec.draw_step is not None:
            inputs = jax.vmap(jax.vmap(spec.draw_step))(inputs)
        if spec.draw_restarts is not None:
            inputs = restart_inputs(inputs, jax.random.split(restart_key, 64))

        def body(state, xs):
            k, step_input = xs
            action = random_actions(k, spec.discrete, spec.num_actions)
            return step_envs(spec, state, action, step_input)[1], None

        return jax.lax.scan(body, state, (jax.random.split(action_key, length), inputs))[0]

    def run_steps(state, key, steps):
        full, rest = divmod(steps, rollout_steps)
        keys = jax.random.split(key, full + 1)
        if full:
            state = jax.lax.scan(lambda s, k: (one_rollout(s, k, rollout_steps), None), state, keys[1:])[0]
        return one_rollout(state, keys[0], rest) if rest else state

    return init, run_steps, spec.num_actions


def scanned(step):
    """`run_steps` of a loop given by its one-step function."""

    def run_steps(state, key, steps):
        return jax.lax.scan(lambda s, k: (step(s, k), None), state, jax.random.split(key, steps))[0]

    return run_steps


def steps_per_second(init, run_steps, steps: int, repeats: int) -> float:
    def run(key):
        return run_steps(init(key), key, steps)

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
    parser.add_argument("--rollout-steps", type=int, default=128, help="steps per rollout (rltui's num_steps)")
    parser.add_argument("--suites", default=",".join(ENVS), help="comma-separated suites to run (default: all)")
    args = parser.parse_args()
    unknown = sorted(set(args.suites.split(",")) - set(ENVS))
    if unknown:
        parser.error(f"unknown suite {unknown[0]!r}; choose from {', '.join(ENVS)}")
    print(f"{'env':<38} {'bare steps/s':>14} {'rltui steps/s':>14} {'ratio':>6}")
    for suite in args.suites.split(","):
        env_id = ENVS[suite]
        if importlib.util.find_spec(suite) is None:
            print(f'{env_id:<38} not installed (pip install "rltui[{suite}]")')
            continue
        w_init, w_run, n = wrapped(env_id, args.rollout_steps)
        b_init, b_step = BARE[suite](n)
        b = steps_per_second(b_init, scanned(b_step), args.steps, args.repeats)
        w = steps_per_second(w_init, w_run, args.steps, args.repeats)
        print(f"{env_id:<38} {b:>14,.0f} {w:>14,.0f} {b / w:>6.2f}")


if __name__ == "__main__":
    main()
