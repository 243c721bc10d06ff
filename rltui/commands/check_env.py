"""`rltui check-env SPEC`: run a candidate environment through what training needs, as a
table of checks with pass/fail and the reason. `preflight` is the cheap part (import,
interface, action space, tracing reset and step by shape, the network's needs), which
`rltui launch` and the Python API run before compiling anything."""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from trainers.algorithms import DEFAULT_ALGORITHM, action_problem, bounds_problem

CHECK_ENVS = 4


class Check(NamedTuple):
    name: str
    status: str  # "pass", "fail", "warn" (training works, but look) or "skip" (not run after a failure)
    reason: str


# Every check, in the order they run: what the table lists.
CHECK_NAMES = (
    "import and interface", "reset: jit and vmap", "step: jit and vmap", "observations match observation_space",
    "action space supported", "rewards are finite scalars", "done flags are booleans",
    "deterministic for a fixed key", "observations and rewards stay finite", "an episode ends within the limit",
    "one policy update runs", "checkpoint and resume",
)


class CheckFailed(Exception):
    """A check that fails; the message is the reason."""


def preflight(env_id: str, network: str = "mlp"):
    """The env's `EnvSpec`, or `env_import.EnvImportError` (a ValueError) with the first
    problem as one line. Traces reset and step by shape only: nothing is compiled."""
    from trainers.env_import import EnvImportError
    from trainers.envs import make_env

    try:
        spec = make_env(env_id)
    except EnvImportError as err:
        raise _in_this_process(err) from None
    if network == "cnn" and len(spec.obs_shape) != 3:
        shape = "x".join(str(d) for d in spec.obs_shape)
        raise ValueError(
            f"network: cnn needs image observations of shape (height, width, channels); {env_id} gives {shape}"
        )
    return spec


def _in_this_process(err):
    """`err` naming the process it happened in, when the run spans several: each process
    imports the env module itself, so one machine may lack what another has."""
    import jax

    from trainers.env_import import EnvImportError, EnvModuleNotFound

    if jax.process_count() == 1:
        return err
    if isinstance(err, EnvModuleNotFound):
        err = EnvModuleNotFound(err.module, err.missing, "install it, or put its directory on PYTHONPATH; "
                                "every process of a run imports the env module")
    return EnvImportError(f"process {jax.process_index()} of {jax.process_count()}: {err}")


def _raw(spec) -> Any:
    """The author's env under rltui's wrappers (logging, flattening, the adapter)."""
    env = spec.env
    while hasattr(env, "_env") and type(env).__name__ != "ImportedEnv":
        env = env._env
    inner = getattr(env, "_env", env)
    return getattr(inner, "_env", inner) if type(inner).__name__ == "PresampledResetWrapper" else inner


def run_checks(env_id: str, network: str = "mlp", algo: str = DEFAULT_ALGORITHM) -> list[Check]:
    """Every check, in order; after a failure that leaves nothing to test, the rest are not
    run, and are listed as skipped."""
    checks = _run_checks(env_id, network, algo)
    done = {c.name for c in checks}
    return checks + [Check(name, "skip", "not run: a check above failed") for name in CHECK_NAMES if name not in done]


def _run_checks(env_id: str, network: str, algo: str) -> list[Check]:
    checks: list[Check] = []
    try:
        spec = preflight(env_id, network)
    except ValueError as err:
        return [Check("import and interface", "fail", str(err).removeprefix("env: "))]
    shape = "x".join(str(d) for d in spec.obs_shape)
    actions = f"Discrete({spec.num_actions})" if spec.discrete else f"Box({spec.num_actions} values)"
    checks.append(Check("import and interface", "pass", f"observations {shape}, actions {actions}"))

    import jax
    import jax.numpy as jnp
    import numpy as np

    from trainers.env_import import one_line
    from trainers.envs import episode_limit

    raw = _raw(spec)
    params = spec.params
    keys = jax.random.split(jax.random.PRNGKey(0), CHECK_ENVS)

    def attempt(name: str, fn):
        try:
            detail = fn()
        except CheckFailed as err:
            checks.append(Check(name, "fail", str(err)))
            return False
        except Exception as err:  # noqa: BLE001 - the env's own code may raise anything
            checks.append(Check(name, "fail", one_line(err)))
            return False
        status, reason = detail if isinstance(detail, tuple) else ("pass", detail)
        checks.append(Check(name, status, reason))
        return True

    state: dict[str, Any] = {}

    def reset_check():
        obs, env_state = jax.jit(jax.vmap(raw.reset, in_axes=(0, None)))(keys, params)
        state.update(obs=obs, env_state=env_state)
        return f"{CHECK_ENVS} envs reset under jit(vmap)"

    if not attempt("reset: jit and vmap", reset_check):
        return checks

    def random_actions(key):
        if spec.discrete:
            return jax.random.randint(key, (CHECK_ENVS,), 0, spec.num_actions)
        low, high = jnp.asarray(spec.action_low), jnp.asarray(spec.action_high)
        u = jax.random.uniform(key, (CHECK_ENVS, spec.num_actions))
        finite_low, finite_high = jnp.where(jnp.isfinite(low), low, -1.0), jnp.where(jnp.isfinite(high), high, 1.0)
        flat = finite_low + u * (finite_high - finite_low)
        action_shape = tuple(raw.action_space(params).shape)
        return flat.reshape((CHECK_ENVS,) + action_shape)

    vstep = jax.jit(jax.vmap(raw.step, in_axes=(0, 0, 0, None)))

    def step_check():
        out = vstep(keys, state["env_state"], random_actions(jax.random.PRNGKey(1)), params)
        state["step"] = out
        return f"{CHECK_ENVS} envs stepped under jit(vmap)"

    if not attempt("step: jit and vmap", step_check):
        return checks
    obs, _, reward, terminated, truncated, _ = state["step"]

    def obs_check():
        space = raw.observation_space(params)
        leaves = jax.tree.leaves(state["obs"])
        for what, values in (("reset", leaves), ("step", jax.tree.leaves(obs))):
            bad = next(filter(None, map(_not_finite, values)), None)
            if bad:
                raise CheckFailed(f"{what} gives {bad} in its observations")
        if len(leaves) != 1 or not hasattr(space, "shape"):
            return f"a pytree of {len(leaves)} arrays, flattened into {spec.obs_size} values"
        declared = tuple(int(d) for d in space.shape)
        for what, value in (("reset", leaves[0]), ("step", jax.tree.leaves(obs)[0])):
            if tuple(value.shape[1:]) != declared:
                raise CheckFailed(f"{what} gives shape {tuple(value.shape[1:])}, observation_space declares {declared}")
        dtype = getattr(space, "dtype", None)
        if dtype is not None and np.dtype(dtype) != leaves[0].dtype:
            return "warn", f"dtype {leaves[0].dtype}, observation_space declares {np.dtype(dtype)} (cast to float32)"
        return f"shape {declared}, dtype {leaves[0].dtype}"

    attempt("observations match observation_space", obs_check)

    def action_check():
        space = raw.action_space(params)
        problem = action_problem(algo, "discrete" if spec.discrete else "continuous", env_id)
        if problem is not None:
            raise CheckFailed(problem.removeprefix("algo: "))
        if spec.discrete:
            return f"Discrete({spec.num_actions}): actions 0..{spec.num_actions - 1}"
        problem = bounds_problem(algo, env_id, spec.action_low, spec.action_high)
        if problem is not None:
            raise CheckFailed(problem.removeprefix("algo: "))
        if not (np.all(np.isfinite(spec.action_low)) and np.all(np.isfinite(spec.action_high))):
            return "warn", "Box bounds are not all finite: actions are not clipped in those dimensions"
        return f"Box{tuple(space.shape)} in [{float(spec.action_low.min()):g}, {float(spec.action_high.max()):g}]"

    supported = attempt("action space supported", action_check)

    def reward_check():
        r = np.asarray(reward)
        if r.shape != (CHECK_ENVS,):
            raise CheckFailed(f"reward has shape {r.shape[1:]} per env; expected a scalar")
        bad = _not_finite(r)
        if bad:
            raise CheckFailed(f"reward is {bad}")
        return f"scalar {r.dtype}"

    attempt("rewards are finite scalars", reward_check)

    def flags_check():
        for name, flag in (("terminated", terminated), ("truncated", truncated)):
            f = np.asarray(flag)
            if f.shape != (CHECK_ENVS,):
                raise CheckFailed(f"{name} has shape {f.shape[1:]} per env; expected a scalar")
            if f.dtype != np.bool_:
                raise CheckFailed(f"{name} is {f.dtype}; expected bool (e.g. jnp.bool_(x) or x >= limit)")
        return "terminated and truncated are bool scalars, kept apart"

    attempt("done flags are booleans", flags_check)

    limit = episode_limit(params)

    def episode(key):
        """A random policy's rollout of `limit` + 1 steps on the wrapped env (as trained)."""
        reset_key, run_key = jax.random.split(key)
        env = spec.env
        _, s = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(reset_key, CHECK_ENVS), params)

        def body(carry, k):
            s = carry
            act_key, step_key = jax.random.split(k)
            a = random_actions(act_key).reshape(CHECK_ENVS, -1) if not spec.discrete else random_actions(act_key)
            o, s, r, term, trunc, _ = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
                jax.random.split(step_key, CHECK_ENVS), s, a, params
            )
            return s, (o, r, term | trunc)

        _, (os_, rs, dones) = jax.lax.scan(body, s, jax.random.split(run_key, limit + 1))
        return os_, rs, dones

    run = jax.jit(episode)

    def determinism_check():
        a, b = run(jax.random.PRNGKey(3)), run(jax.random.PRNGKey(3))
        for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
            # NaN where the other run has NaN is the same: a NaN is not randomness (the next check names it)
            if not np.array_equal(np.asarray(x), np.asarray(y), equal_nan=True):
                raise CheckFailed("two runs from the same key differ (randomness outside the key, e.g. numpy.random)")
        state["episode"] = a
        return f"{limit + 1} steps from one key, twice: identical"

    if not attempt("deterministic for a fixed key", determinism_check):
        return checks

    def finite_check():
        observations, rewards, _ = state["episode"]
        for what, values in (("observations", jax.tree.leaves(observations)), ("rewards", [rewards])):
            for leaf in values:
                bad = _not_finite(leaf)
                if bad:
                    not_finite = ~np.isfinite(np.asarray(leaf).reshape(len(leaf), -1))
                    step = int(np.argmax(not_finite.any(axis=1)))
                    raise CheckFailed(f"step {step + 1} of a random episode gives {bad} in its {what}")
        return f"observations and rewards finite over {limit + 1} random steps"

    attempt("observations and rewards stay finite", finite_check)

    def end_check():
        _, _, dones = state["episode"]
        ended = np.asarray(dones).any(axis=0)
        if not ended.all():
            declared = "params.max_steps_in_episode" if hasattr(params, "max_steps_in_episode") else "no declared limit"
            return "warn", (
                f"{int((~ended).sum())} of {CHECK_ENVS} random episodes did not end within {limit} steps "
                f"({declared}); returns are only reported when episodes end"
            )
        return f"every random episode ended within {limit} steps"

    attempt("an episode ends within the limit", end_check)
    if not supported:  # the algorithm cannot train on these actions: no update to run
        return checks

    def update_check():
        from trainers import checkpoint
        from trainers.hparams import DynamicHParams, StaticConfig
        from trainers.metrics_spec import divergence_metrics
        from trainers.parallel import build

        static = StaticConfig(env_id=env_id, algo=algo, network=network, num_envs=CHECK_ENVS, num_steps=8,
                              num_minibatches=1, update_epochs=1, max_chunk_updates=1)
        parallel = build(static, jax.local_devices()[:1])
        # Learning from the first transitions: an algorithm with a replay buffer takes its
        # gradient steps (sampled from the buffer) in this one update.
        hparams = DynamicHParams.create(anneal_updates=1.0, learning_starts=0.0)
        train_state = parallel.init(parallel.seed_keys(0), hparams)
        train_state, metrics = parallel.run_chunk(train_state, hparams, 1)
        update = {name: float(np.asarray(value).reshape(-1)[0]) for name, value in vars(metrics.per_update).items()}
        # What the session's divergence guard reads for this algorithm (its losses, gradient norm, ...).
        bad = [name for name in divergence_metrics(algo) if not math.isfinite(update[name])]
        if bad:
            raise CheckFailed(f"one update's {', '.join(bad)} {'is' if len(bad) == 1 else 'are'} not finite")
        if not checkpoint.is_finite(parallel.to_portable(train_state)):
            raise CheckFailed("the parameters after one update hold NaN or inf")
        state.update(parallel=parallel, hparams=hparams, train_state=train_state)
        steps = update["gradient_steps"]
        taken = f", {int(steps)} gradient steps from its replay buffer" if math.isfinite(steps) else ""
        return f"one {algo} update ran ({CHECK_ENVS} envs x 8 steps{taken})"

    if not attempt("one policy update runs", update_check):
        return checks

    def checkpoint_check():
        # What a run's checkpoint and `--resume` do: the whole state (the env's own state
        # classes included) to bytes and back, then one more update from each copy.
        from trainers import checkpoint

        parallel, hparams, trained = state["parallel"], state["hparams"], state["train_state"]
        portable = parallel.to_portable(trained)
        restored, _ = checkpoint.decode(checkpoint.encode(portable, {}), portable)
        resumed = parallel.put(parallel.from_portable(restored), like=trained)
        _, going_on = parallel.run_chunk(trained, hparams, 1)
        _, after_resume = parallel.run_chunk(resumed, hparams, 1)
        for a, b in zip(jax.tree.leaves(going_on), jax.tree.leaves(after_resume)):
            if not np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True):
                raise CheckFailed("the update after a restored checkpoint differs from the one it continues")
        return "saved, restored, and the next update is the same"

    attempt("checkpoint and resume", checkpoint_check)
    return checks


def _not_finite(values: Any) -> str | None:
    """"NaN" or "inf" when `values` hold one (NaN first: it is the likelier bug), else None."""
    import numpy as np

    array = np.asarray(values)
    if not np.issubdtype(array.dtype, np.inexact):
        return None
    if np.isnan(array).any():
        return "NaN"
    return "inf" if np.isinf(array).any() else None


def render(checks: list[Check]) -> str:
    width = max(len(c.name) for c in checks)
    lines = [f"{'check':<{width}}  result  reason"]
    for c in checks:
        lines.append(f"{c.name:<{width}}  {c.status:<6}  {c.reason}")
    return "\n".join(lines)


def cmd_check_env(args) -> int:
    """Exit 0 when training will work (warnings allowed), 2 otherwise."""
    from rltui.config.keys import ConfigError, coerce_value
    from rltui.errors import ExitCode, report
    from rltui.infra import runtime

    try:
        env_id = coerce_value("env", args.spec)
        if args.env_kwargs:
            from rltui.config.toml_text import parse_set_value
            from trainers.env_import import env_id_with_kwargs, is_import_path

            kwargs = parse_set_value(args.env_kwargs)
            if not isinstance(kwargs, dict) or not is_import_path(env_id):
                raise ConfigError("--env-kwargs: expected a TOML inline table like {n = 3}, for an import path")
            env_id = env_id_with_kwargs(env_id, kwargs)
    except ConfigError as err:
        return report(err)
    runtime.configure_jax(host_devices=0, compile_cache=True)
    checks = run_checks(env_id, network=args.network, algo=args.algo)
    print(render(checks))
    failed = [c for c in checks if c.status == "fail"]
    if failed:
        return report(f"{env_id}: {failed[0].name}: {failed[0].reason}")
    print(f"{env_id}: training will work" + (" (see the warnings)" if any(c.status == "warn" for c in checks) else ""))
    return ExitCode.OK


def add_parser(sub) -> None:
    from trainers.algorithms import ALGORITHMS
    from trainers.hparams import NETWORKS

    check_env = sub.add_parser(
        "check-env", help="check that an environment will train",
        description="Run an environment through what training needs (import, interface, jit and vmap of reset and "
        "step, shapes and dtypes against the declared spaces, finite scalar rewards, boolean done flags, "
        "determinism, episode ends, one policy update) and print each check. Exit 0 when training will work, 2 "
        "otherwise.",
    )
    check_env.add_argument(
        "spec", metavar="SPEC", help="an env id (rltui envs) or an import path, my_pkg.envs:make_env"
    )
    check_env.add_argument("--env-kwargs", metavar="TABLE", help="keyword arguments for an import path, e.g. '{n = 3}'")
    check_env.add_argument(
        "--network", default="mlp", choices=NETWORKS, help="policy network (default mlp)"
    )
    check_env.add_argument("--algo", default=DEFAULT_ALGORITHM, choices=tuple(ALGORITHMS),
                           help=f"algorithm (default {DEFAULT_ALGORITHM})")
    check_env.set_defaults(run=cmd_check_env)
