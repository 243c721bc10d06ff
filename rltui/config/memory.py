"""How much device memory a run needs, estimated before compiling, and a refusal of one
that does not fit: a population's agents, a single run (one agent), and `rltui eval`'s
batch of episodes.

The estimate for training counts, per agent, in float32 (4 bytes):

* replicated on every device: the parameters P (counted by `jax.eval_shape` of the
  network's init, nothing allocated) x 6: params, gradients, Adam's two moments, the
  update, and the flat copy the optimizer works on; plus the chunk's metrics buffer
  (max_chunk_updates x 32 values);
* split over the devices with the environments: the env states (from `jax.eval_shape` of
  the env's reset) and observations, twice (before and after a step); the rollout buffer,
  num_steps x num_envs x (2 x obs_size + 7 + action size (+ the GRU's hidden state)), twice
  (the rollout, and the shuffled copy the minibatches are cut from); and the activations
  of one minibatch's forward and backward pass, rows x 2 towers x sum(hidden_sizes) x 3
  (a CNN adds each pixel's 3x3 patch and convolution features per row), or of an
  evaluation's forward pass (one row per episode) where that is larger;
* for an algorithm with a replay buffer, the buffer (`replay_keys.buffer_bytes`), split
  over the devices with the environments as well.

The sum is multiplied by SAFETY for what the count leaves out (XLA's temporaries and
fusion buffers, padding, the allocator's fragmentation): the estimate errs high, so a
refusal means the run would not fit, not that it might be tight. The refusal names the
part that needs the most, and the keys that shrink it.

Saving a checkpoint holds CHECKPOINT_COPIES copies of it in the host's memory at once (the
state fetched from the devices, and its serialized bytes as they grow): on CPU devices,
which share that memory, they count against it too. A replay buffer kept in checkpoints
makes them as large as the buffer.

`rltui eval` needs no guess: XLA's own buffer assignment of the compiled evaluation
(`memory_analysis`) says what it needs, before anything runs.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from rltui.errors import UsageError
from trainers.algorithms import algorithm

# What lowers a population's member count, grid or sampled (`sweep_size` counts only a
# sampled sweep's; a grid has one member per combination of its values).
SWEEP_SIZE = "the sweep's size"
FLOAT = 4  # bytes: everything the trainer keeps is float32 (or int32/uint32 of the same size)
SAFETY = 2.0
CHECKPOINT_COPIES = 3
_METRICS_PER_UPDATE = 32  # values a chunk's metrics buffer holds per update, with room to spare
_GIB = 2**30


class AgentFootprint(NamedTuple):
    """One agent's bytes (before SAFETY), by part: `params` (replicated on every device),
    `rollout` (the env states, observations and rollout buffers), `activations` and
    `replay` (the replay buffer; 0 without one), the last three split over the devices
    with the environments."""

    params: int
    rollout: int
    activations: int
    replay: int = 0

    @property
    def replicated(self) -> int:
        return self.params

    @property
    def split(self) -> int:
        return self.rollout + self.activations + self.replay


def agent_footprint(static: Any, spec: Any, *, eval_episodes: int = 0) -> AgentFootprint:
    """One agent of `static` (a StaticConfig) on `spec` (an EnvSpec), counted as the module
    says; shapes by `jax.eval_shape`, so nothing is allocated or compiled. `eval_episodes`:
    the batch of an evaluation between chunks, 0 without one."""
    from trainers.networks import ActorCritic

    steps = static.num_envs * static.num_steps
    rows = _rows(static)
    params, env_bytes, recurrent = _shapes(static, spec)
    # A CNN's shared convolution sees each pixel's 3x3 patch and gives CONV_FEATURES per pixel.
    image = spec.obs_shape if static.network == "cnn" else None
    conv = math.prod(image[:-1]) * (9 * image[-1] + ActorCritic.CONV_FEATURES) if image else 0
    # An evaluation runs between chunks, forward only: its activations replace the chunk's.
    activations = max(rows * 3, eval_episodes) * (2 * sum(static.hidden_sizes) + conv)
    action = 1 if spec.discrete else spec.num_actions
    hidden = static.hidden_sizes[0] if recurrent else 0
    per_step = 2 * spec.obs_size + 7 + action + hidden
    return AgentFootprint(
        params=6 * params * FLOAT + static.max_chunk_updates * _METRICS_PER_UPDATE * FLOAT,
        rollout=2 * static.num_envs * (env_bytes + spec.obs_size * FLOAT) + 2 * steps * per_step * FLOAT,
        activations=activations * FLOAT,
        replay=_replay_bytes(static, spec),
    )


def _replay_bytes(static: Any, spec: Any) -> int:
    """One agent's replay buffer, 0 for an algorithm without one."""
    from trainers.replay_keys import buffer_bytes

    # An algorithm with a replay buffer lists its keys (`replay_keys.REPLAY_KEYS`).
    if not any(key.name == "buffer_size" for key in algorithm(static.algo).keys):
        return 0
    return buffer_bytes(static, spec.obs_size, spec.num_actions, spec.discrete)


def _rows(static: Any) -> int:
    """The rows of one gradient step: the batch over the algorithm's minibatches."""
    return static.num_envs * static.num_steps // algorithm(static.algo).minibatches(static)


# The last agent traced, as (static, spec, shapes): a launch checks the same agent's memory
# and then its checkpoint's size, and one trace serves both.
_LAST_TRACED: list[tuple[Any, Any, tuple[int, int, bool]]] = []


def _shapes(static: Any, spec: Any) -> tuple[int, int, bool]:
    """The agent's parameter count, one env state's bytes, and whether the network is
    recurrent: traced by `jax.eval_shape`, nothing allocated."""
    for traced_static, traced_spec, shapes in _LAST_TRACED:
        if traced_spec is spec and traced_static == static:
            return shapes
    shapes = _trace_shapes(static, spec)
    _LAST_TRACED[:] = [(static, spec, shapes)]
    return shapes


def _trace_shapes(static: Any, spec: Any) -> tuple[int, int, bool]:
    import jax
    import jax.numpy as jnp

    from trainers.base import OnPolicyTrainer

    trainer = OnPolicyTrainer(static, spec)
    obs = jnp.zeros((1, spec.obs_size), jnp.float32)

    def init_params(key):
        if trainer.recurrent:
            return trainer.network.init(key, trainer.initial_hidden(1), obs)
        return trainer.network.init(key, obs)

    key = jax.random.PRNGKey(0)
    params = sum(math.prod(leaf.shape) for leaf in jax.tree.leaves(jax.eval_shape(init_params, key)))
    _, env_state = jax.eval_shape(spec.env.reset, key, spec.params)
    return params, tree_bytes(env_state), trainer.recurrent


def estimate_agent_bytes(static: Any, spec: Any) -> int:
    """The bytes one agent needs on one device during a chunk, SAFETY included."""
    footprint = agent_footprint(static, spec)
    return math.ceil(SAFETY * (footprint.replicated + footprint.split))


def device_free_bytes(device: Any) -> int | None:
    """Memory free for `device`, or None when unknown: for a CPU device, the host's
    available memory (MemAvailable in /proc/meminfo, else free pages); for an accelerator,
    its allocator's limit less what is in use."""
    if device.platform == "cpu":
        return host_available_bytes()
    stats = device.memory_stats() or {}
    if "bytes_limit" not in stats:
        return None
    return int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0))


def host_available_bytes(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    try:
        for line in meminfo.read_text(encoding="ascii").splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024  # the file counts kB
    except (OSError, ValueError, IndexError):
        pass  # not Linux, or unreadable: the page counts below
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None


def check_population_fits(
    static: Any, spec: Any, devices: Sequence[Any], *, free_bytes: Callable[[Any], int | None] = device_free_bytes,
    eval_episodes: int = 0,
) -> None:
    """UsageError (one line, exit 2) when the agents of `static` (num_members x num_seeds;
    a single run is one) need more memory than `free_bytes` reports free, before anything is
    built or compiled. CPU devices share the host's memory, so their needs add up against it
    once; each accelerator is compared with its own free memory. An unknown free memory
    passes. `eval_episodes`: as `agent_footprint`."""
    import jax

    footprint = agent_footprint(static, spec, eval_episodes=eval_episodes)
    agents = static.num_members * static.num_seeds
    count = max(1, len(devices))
    per_device = SAFETY * agents * (footprint.replicated + footprint.split / count)
    # Over several processes each checks its own devices (another's memory is not its to read).
    local = [device for device in devices if getattr(device, "process_index", 0) == jax.process_index()]
    cpus = [device for device in local if device.platform == "cpu"]
    saving = CHECKPOINT_COPIES * checkpoint_bytes(static, spec)
    checks = [(cpus[0], per_device * len(cpus) + saving, "cpu")] if cpus else []
    checks += [
        (device, per_device, f"{device.platform} {device.id}") for device in local if device.platform != "cpu"
    ]
    for device, need, where in checks:
        free = free_bytes(device)
        if free is not None and need > free:
            cause, keys = _largest_part(static, footprint, count)
            noun = "this run" if agents == 1 else f"population of {agents:,} agents"
            keys = [*([SWEEP_SIZE] if static.num_members > 1 else []),
                    *(["num_seeds"] if static.num_seeds > 1 else []), *keys]
            # On the CPU a checkpoint of the buffer is copied in memory while it is saved.
            copies = where == "cpu" and footprint.replay and getattr(static, "replay_in_checkpoint", False)
            raise UsageError(
                f"{noun} needs about {_gib(need)} GiB, more than the {_gib(max(free, 0))} GiB free on {where} "
                f"(mostly {cause}); lower {_either(keys)}"
                + ("; or set replay_in_checkpoint = false" if copies else "")
            )


def checkpoint_bytes(static: Any, spec: Any) -> int:
    """About the size of the run's checkpoint file: every agent's parameters and Adam's two
    moments, each of its envs' state, observation and (recurrent networks) hidden state, and
    its replay buffer and target network where it has them and keeps them there."""
    params, env_bytes, recurrent = _shapes(static, spec)
    hidden = static.hidden_sizes[0] if recurrent else 0
    per_agent = 3 * params * FLOAT + static.num_envs * (env_bytes + (spec.obs_size + hidden) * FLOAT)
    replay = _replay_bytes(static, spec)
    if replay:
        per_agent += params * FLOAT + (replay if static.replay_in_checkpoint else 0)
    return static.num_members * static.num_seeds * per_agent


def check_checkpoint_fits(static: Any, spec: Any) -> None:
    """UsageError (one line, exit 2) for a run whose checkpoints would be larger than rltui
    writes (and so reads back): refused at launch, not at its first save."""
    from trainers.checkpoint import MAX_BYTES

    size = checkpoint_bytes(static, spec)
    if size > MAX_BYTES:
        keys = [*([SWEEP_SIZE] if static.num_members > 1 else []), *(["num_seeds"] if static.num_seeds > 1 else []),
                "num_envs", "hidden_sizes"]
        raise UsageError(f"this run's checkpoints would be about {_gib(size)} GiB, more than the "
                         f"{_gib(MAX_BYTES)} GiB rltui writes and reads back; lower {_either(keys)}")


def _largest_part(static: Any, footprint: AgentFootprint, devices: int) -> tuple[str, list[str]]:
    """What needs the most memory on one device, in words, and the keys that shrink it."""
    widths = f"hidden_sizes {list(static.hidden_sizes)}"
    parts = [
        (footprint.params, f"the parameters and optimizer state of {widths}", ["hidden_sizes"]),
        (footprint.rollout / devices, f"the rollout of num_envs {static.num_envs:,} x num_steps "
                                      f"{static.num_steps:,}", ["num_envs", "num_steps"]),
        (footprint.activations / devices, f"the activations of {widths} over {_rows(static):,} rows at once",
         ["num_envs", "num_steps", "hidden_sizes"]),
        (footprint.replay / devices, f"the replay buffer of buffer_size {getattr(static, 'buffer_size', 0):,}",
         ["buffer_size"]),
    ]
    _, cause, keys = max(parts, key=lambda part: part[0])
    return cause, keys


def _either(keys: Sequence[str]) -> str:
    return keys[0] if len(keys) == 1 else f"{', '.join(keys[:-1])} or {keys[-1]}"


def tree_bytes(shapes: Any) -> int:
    """The bytes of a pytree of arrays or `jax.ShapeDtypeStruct`s."""
    import jax

    return sum(math.prod(leaf.shape) * leaf.dtype.itemsize for leaf in jax.tree.leaves(shapes))


def check_policy_fits(
    host_bytes: int, device_bytes: int, device: Any, *, policy: str, action: str = "act",
    free_bytes: Callable[[Any], int | None] = device_free_bytes, host_free: Callable[[], int | None] | None = None,
) -> None:
    """UsageError (one line, exit 2) when a checkpoint's policy cannot be held to act with:
    `host_bytes` (its state as decoded on the host) and `device_bytes` (its parameters
    placed on `device`), each with SAFETY. A CPU device's memory is the host's, so there they
    add up. `policy` names it in the message, `action` says what it is held for."""
    host_free = host_free or host_available_bytes
    if device.platform == "cpu":
        checks = [(SAFETY * (host_bytes + device_bytes), free_bytes(device), "cpu")]
    else:
        checks = [(SAFETY * host_bytes, host_free(), "the host"),
                  (SAFETY * device_bytes, free_bytes(device), f"{device.platform} {device.id}")]
    for need, free, where in checks:
        if free is not None and need > free:
            raise UsageError(f"{policy} needs about {_gib(need)} GiB to {action}, more than the "
                             f"{_gib(max(free, 0))} GiB free on {where}")


def check_evaluation_fits(
    compile_for: Callable[[int], Any], episodes: int, device: Any, *, policy: str, host_bytes: int = 0,
    free_bytes: Callable[[Any], int | None] = device_free_bytes,
) -> Any:
    """The evaluation of `episodes` episodes at once, compiled by `compile_for(episodes)`;
    UsageError (one line, exit 2) instead when it needs more memory than `device` has free,
    by XLA's own count of its buffers (`memory_analysis`), before it runs. `policy` names the
    policy in the message. On the CPU the checkpoint's state decoded on the host
    (`host_bytes`) counts too. The episodes' buffers grow in proportion to their number,
    above what one episode needs: a refusal names the most that fit. A program or device
    whose memory is unknown passes."""
    if device.platform != "cpu":  # the decoded state is in the host's memory, not the device's
        check_policy_fits(host_bytes, 0, device, policy=policy, action="evaluate", free_bytes=free_bytes)
    compiled = compile_for(episodes)
    need, free = _program_bytes(compiled), free_bytes(device)
    if need is None or free is None:
        return compiled
    fixed, batch = need[0] + (host_bytes if device.platform == "cpu" else 0), need[1]
    if fixed + batch <= free:
        return compiled
    where = "cpu" if device.platform == "cpu" else f"{device.platform} {device.id}"
    one = batch if episodes == 1 else (_program_bytes(compile_for(1)) or need)[1]
    if fixed + one > free:
        raise UsageError(f"{policy} needs about {_gib(fixed + one)} GiB to evaluate one episode, more than the "
                         f"{_gib(max(free, 0))} GiB free on {where}")
    each = (batch - one) / (episodes - 1)
    most = 1 + math.floor((free - fixed - one) / each)
    raise UsageError(
        f"--episodes: {episodes:,} episodes at once need about {_gib(fixed + batch)} GiB, more than the "
        f"{_gib(free)} GiB free on {where}; at most {most:,} fit"
    )


def _program_bytes(compiled: Any) -> tuple[int, int] | None:
    """A compiled program's (arguments, temporaries and outputs) in bytes; None when its
    backend does not say."""
    try:
        analysis = compiled.memory_analysis()
    except (AttributeError, NotImplementedError, RuntimeError):
        return None
    if analysis is None:
        return None
    return analysis.argument_size_in_bytes, analysis.temp_size_in_bytes + analysis.output_size_in_bytes


def _gib(count: float) -> str:
    gib = count / _GIB
    return f"{gib:,.0f}" if gib >= 100 else f"{gib:.3g}"
