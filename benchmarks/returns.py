"""Re-run the results table of docs/presets.md: each env's settings (its preset, else its
family's), N seeds trained at once in one program (`num_seeds`), and the return each seed ends at.

    python benchmarks/returns.py                      # the whole table, 3 seeds: about 50 minutes on 2 cores
    python benchmarks/returns.py Acrobot-v1 --seeds 5 --set total_timesteps=1e6
    python benchmarks/returns.py --random Catch-bsuite   # a random policy only, no training
    python benchmarks/returns.py --algo pqn Breakout-MinAtar --check-every 1e6 [--stop-at-reference]

The default runs every env with a preset and every env whose family records a result.
"Eval" is the final policy's mean return over 32 greedy episodes (`--episodes`), as `rltui
eval` runs it; "train" is the mean episode return over the last 10 updates of training
that finished episodes, as the dashboard and metrics.jsonl show it (sampled actions);
"random" is a uniformly random policy on the same 32 episodes. Each seed's line on stderr also
gives "sampled": the final policy over 164 episodes with sampled actions
(`--sampled-episodes`), which is how gymnax-blines measured the reference returns
(`rltui eval --sample`). Wall time is for all seeds together, compile included. Not part of
the test suite.

`--check-every N` evaluates every seed greedily (as "eval") every N env steps and reports the
first check at which the worst seed reached the env's reference return (its preset record's,
or `--reference`): the steps and time its settings need to reach it, training and compile
only (the checks' own time is left out and printed beside it). `--stop-at-reference` ends
the run there.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

PROGRESS_SECONDS = 120  # how often a run prints its training return to stderr
CHUNK_UPDATES = 64  # updates per compiled call (a traced count: any value, one program)
EVAL_SEED = 1  # every seed's policy is evaluated on the same start states (pendulum_optimum.py too)


@dataclasses.dataclass
class Reached:
    """The first `--check-every` check at which every seed's greedy return reached the
    reference."""

    steps: int
    returns: list[float]
    seconds: float  # training and compile to this check
    check_seconds: float  # the checks' own time to this check, left out of `seconds`


def train(config, check_every: int = 0, reference: float | None = None, episodes: int = 32,
          stop_at_reference: bool = False) -> tuple[Any, Any, list[float], float, Reached | None]:
    """(the trained DataParallel, its final state, each seed's final training return, wall
    seconds, where the run first reached `reference`). With `check_every`, the run evaluates
    each seed greedily over `episodes` every `check_every` updates, notes the first check
    whose worst seed reaches `reference` and, with `stop_at_reference`, stops there; the
    checks' time is not in the wall seconds."""
    import jax
    import numpy as np

    from trainers import parallel as data_parallel

    start = time.perf_counter()
    static, hp = config.static_config(), config.dynamic_hparams()
    parallel = data_parallel.build(static, jax.local_devices()[:1])
    state = parallel.init(parallel.seed_keys(config.seed), hp)
    check = seed_evaluator(parallel, config, episodes) if check_every else None
    returns, done, shown, checking, reached = [], 0, start, 0.0, None
    while done < config.total_updates and not (stop_at_reference and reached):
        count = min(static.max_chunk_updates, CHUNK_UPDATES, config.total_updates - done)
        if check is not None:
            count = min(count, check_every - done % check_every)
        state, metrics = parallel.run_chunk(state, hp, count)
        returns.append(np.asarray(metrics.per_update.episode_return).reshape(config.num_seeds, -1)[:, :count])
        done += count
        if check is not None and done % check_every == 0:
            began = time.perf_counter()
            training = began - start - checking
            greedy = check(state)
            checking += time.perf_counter() - began
            print(f"  {config.env}: {done * static.steps_per_update / 1e6:.2f}M steps, {training:.0f} s training, "
                  f"greedy {', '.join(map(figure, greedy))}", file=sys.stderr, flush=True)
            if reached is None and min(greedy) >= reference:
                reached = Reached(done * static.steps_per_update, greedy, training, checking)
        if time.perf_counter() - shown > PROGRESS_SECONDS:  # long runs (MinAtar: an hour) show they move
            shown = time.perf_counter()
            print(f"  {config.env}: {done * static.steps_per_update / 1e6:.2f}M steps, {shown - start:.0f} s, train "
                  + ", ".join(map(figure, latest_returns(returns))), file=sys.stderr, flush=True)
    final = latest_returns(returns)
    seconds = time.perf_counter() - start - checking
    return parallel, state, final, seconds, reached


def latest_returns(returns: list) -> list[float]:
    """Each seed's training return over the last 10 updates that finished episodes (updates
    in which none ended report NaN: Freeway's 2500-step episodes end together, every 20
    updates); NaN for a seed that has finished none."""
    import numpy as np

    per_seed = np.concatenate(returns, axis=1)
    return [float(np.mean(seed[~np.isnan(seed)][-10:])) if not np.isnan(seed).all() else float("nan")
            for seed in per_seed]


def seed_evaluator(parallel, config, episodes: int = 32, greedy: bool = True) -> Callable[[Any], list[float]]:
    """Each seed's mean return over `episodes` of a state's policy, compiled once."""
    import jax
    import numpy as np

    from trainers.evaluate import evaluate

    trainer = parallel.trainer
    run = jax.jit(jax.vmap(
        lambda p: evaluate(p, jax.random.PRNGKey(EVAL_SEED), spec=trainer.spec, step_fn=trainer.act_step,
                           initial_hidden=trainer.initial_hidden(episodes), episodes=episodes, greedy=greedy,
                           epsilon=config.eps_end if trainer.acts_by_values else None),
    ))

    def seeds_returns(state) -> list[float]:
        acting = jax.tree.map(lambda x: x[0], (state.params, state.obs_stats))  # device 0; (seeds, ...) when seeded
        if config.num_seeds == 1:
            acting = jax.tree.map(lambda x: x[None], acting)
        return [float(r) for r in np.asarray(run(acting)).mean(axis=1)]

    return seeds_returns


def evaluate_seeds(parallel, state, config, episodes: int = 32, greedy: bool = True) -> list[float]:
    return seed_evaluator(parallel, config, episodes, greedy)(state)


def evaluate_random(spec, episodes: int = 32) -> float:
    """A uniformly random policy's mean return on the episodes `evaluate_seeds` runs (the same
    start states): below it, training has learned nothing."""
    import jax
    import jax.numpy as jnp

    from trainers.evaluate import evaluate
    from trainers.networks import PolicyOutputs

    low, high = (-1.0, 1.0) if spec.discrete else (spec.action_low, spec.action_high)
    # The draw is the env's action itself, also where the trainer squashes its own.
    spec = dataclasses.replace(spec, squash_actions=False)

    def draw(_params, key, _obs):
        # The hidden state carries each env's PRNG key. Evaluated greedily, the argmax of iid
        # uniform logits is a uniform discrete action, and a continuous draw is the action.
        key, draw_key = jax.random.split(key)
        sample = jax.random.uniform(draw_key, (spec.num_actions,), jnp.float32, low, high)
        return key, PolicyOutputs(sample, jnp.zeros(()), jnp.zeros(()))

    keys = jax.random.split(jax.random.PRNGKey(EVAL_SEED + 1), episodes)
    run = jax.jit(lambda: evaluate(None, jax.random.PRNGKey(EVAL_SEED), spec=spec, step_fn=draw,
                                   initial_hidden=keys, episodes=episodes, greedy=True))
    return float(run().mean())


def figure(value: float) -> str:
    """A return as the table gives it: one decimal, two below 10 (bsuite's returns are
    fractions of 1)."""
    return f"{value:.1f}" if abs(value) >= 10 else f"{value:.2f}"


def measured_envs(algo: str) -> list[str]:
    """The results table's envs: every env with a preset, then every env measured on its
    family's settings alone (a family `result` record), in trainers/envs.py's order."""
    from rltui.config import presets
    from trainers.envs import SUPPORTED_ENVS
    from trainers.suites import installed, suite_of

    family_measured = [env for env in SUPPORTED_ENVS
                       if not presets.has_preset(algo, env) and presets.result(algo, env) is not None]
    envs = [*presets.presets(algo), *family_measured]
    missing = [env for env in envs if suite_of(env) is not None and not installed(suite_of(env))]
    for env in missing:  # a suite's env (brax:...) runs where its extra is installed
        print(f"  {env}: left out, {suite_of(env).name} is not installed", file=sys.stderr)
    return [env for env in envs if env not in missing]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("envs", nargs="*", help="envs to run (default: every env in the results table)")
    parser.add_argument("--algo", default="ppo")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--episodes", type=int, default=32, help="greedy evaluation episodes per seed (default 32)")
    parser.add_argument("--sampled-episodes", type=int, default=164,
                        help="evaluation episodes with sampled actions per seed, as the reference (default 164)")
    parser.add_argument("--random", action="store_true",
                        help="only a uniformly random policy's return on the evaluation episodes (no training)")
    parser.add_argument("--set", action="append", default=[], dest="overrides", metavar="KEY=VALUE")
    parser.add_argument("--check-every", type=float, default=0, metavar="STEPS",
                        help="evaluate every seed greedily every STEPS env steps, for the time to the reference")
    parser.add_argument("--stop-at-reference", action="store_true",
                        help="with --check-every: stop once every seed has reached the reference")
    parser.add_argument("--reference", type=float, help="the return --check-every looks for (default: the env's "
                        "preset record)")
    args = parser.parse_args(argv)

    from rltui.config import presets
    from rltui.config.build import build_config
    from rltui.config.toml_text import parse_overrides
    from trainers.envs import make_env

    envs = args.envs or measured_envs(args.algo)
    overrides = parse_overrides(args.overrides)
    if args.random:
        print("| env | random policy |")
        print("|---|---|")
        for env in envs:
            print(f"| {env} | {figure(evaluate_random(make_env(env), args.episodes))} |", flush=True)
        return
    print("| env | steps | wall time here | eval: mean over seeds | eval: worst seed | train: mean | random "
          "| reference |")
    print("|---|---|---|---|---|---|---|---|")
    for env in envs:
        config = build_config({}, {"env": env, "algo": args.algo, "num_seeds": args.seeds, **overrides})
        # The reference is the env's: PPO's record holds it where this algorithm's has none.
        recorded = [r.reference for r in (presets.result(args.algo, env), presets.result("ppo", env))
                    if r is not None and r.reference is not None]
        target = args.reference if args.reference is not None else next(iter(recorded), None)
        check_every = 0
        if args.check_every:
            if target is None:
                raise SystemExit(f"{env} has no reference return on record: give one with --reference")
            check_every = max(1, round(args.check_every / config.steps_per_update))
        parallel, state, final, seconds, reached = train(config, check_every, target, args.episodes,
                                                         args.stop_at_reference)
        evals = evaluate_seeds(parallel, state, config, args.episodes)
        sampled = evaluate_seeds(parallel, state, config, args.sampled_episodes, greedy=False)
        random = evaluate_random(parallel.trainer.spec, args.episodes)
        reference = f"{target:g}" if target is not None else "-"
        steps = config.total_updates * config.steps_per_update
        if check_every:
            print(f"  {env}: " + (f"every seed reached {target:g} at {presets.millions_label(reached.steps)} steps, "
                                  f"{reached.seconds:.0f} s (checks: {reached.check_seconds:.0f} s more)" if reached
                                  else f"not every seed reached {target:g} in {presets.millions_label(steps)} steps "
                                  f"({seconds:.0f} s)"), file=sys.stderr, flush=True)
            if args.stop_at_reference and reached:
                steps = reached.steps
        cells = [presets.millions_label(steps), f"{seconds:.0f} s ({args.seeds} seeds)",
                 figure(sum(evals) / len(evals)), figure(min(evals)), figure(sum(final) / len(final)), figure(random),
                 reference]
        print(f"| {env} | {' | '.join(cells)} |", flush=True)
        print(
            f"  per seed: eval {', '.join(map(figure, evals))}; sampled {', '.join(map(figure, sampled))}"
            f" (mean {figure(sum(sampled) / len(sampled))}); train {', '.join(map(figure, final))}",
            file=sys.stderr,
            flush=True,
        )


if __name__ == "__main__":
    main()
