"""A trained policy outside training: made from a trainer's network and arrays
(`policy_header`), written as a policy file (`trainers.policy_file`), and loaded back as a
jitted function of observations (`load_policy`), or as an ONNX graph (`onnx_model`).

It acts as `rltui eval` does (`OnPolicyTrainer.act_step`, `evaluate`): observations
normalised by the run's statistics, the network, then the greedy action (argmax of the
logits or action values; a Gaussian's mean) or a sampled one (from the policy's
distribution, or epsilon-greedy over action values), continuous actions clipped to the
env's bounds, or with `squash` in the header (SAC's) their tanh scaled to them.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from trainers import networks, normalize
from trainers.env_source import one_line
from trainers.hparams import quote
from trainers.json_text import is_count, is_number
from trainers.keys import ACTION_KINDS
from trainers.policy_file import (
    PolicyArrays,
    PolicyFileError,
    build_network,
    describe_network,
    read,
    restore_arrays,
)

# The extra that `onnx_model` needs (pyproject.toml's optional dependencies).
ONNX_EXTRA = "onnx"
RECURRENT_ONNX = "--onnx takes feed-forward policies (mlp, cnn); a GRU's hidden state is not exported"


class PolicyStep(NamedTuple):
    """A recurrent policy's step: the action and the hidden state to pass with the next
    observation (`Policy.initial_hidden` at an episode's start)."""

    action: jax.Array
    hidden: jax.Array


def policy_header(trainer: Any, *, sample_epsilon: float | None, origin: dict[str, Any]) -> dict[str, Any]:
    """The header of `trainer`'s policy (an `OnPolicyTrainer`, any algorithm): its network,
    spaces and acting rule. `sample_epsilon`: the epsilon-greedy rate of a sampled action for
    a network of action values (None: sampled from the policy's distribution). `origin`: where
    it came from (env, algo, update, ...), kept as given."""
    spec = trainer.spec
    hidden = trainer.initial_hidden(1)
    return {
        **origin,
        "network": describe_network(trainer.network),
        "observation": {"shape": list(spec.obs_shape)},
        "actions": {
            "kind": spec.action_kind,
            "size": spec.num_actions,
            "low": None if spec.discrete else np.asarray(spec.action_low, np.float32).tolist(),
            "high": None if spec.discrete else np.asarray(spec.action_high, np.float32).tolist(),
            "squash": bool(spec.squash_actions),
        },
        "sample_epsilon": sample_epsilon,
        "hidden_size": None if hidden is None else int(hidden.shape[-1]),
        "normalize_obs": bool(trainer.static.normalize_obs),
    }


def _checked_header(header: dict[str, Any]) -> dict[str, Any]:
    """`header` with the fields acting reads checked; PolicyFileError names the first bad one."""
    def bad(name: str, value: Any) -> PolicyFileError:
        return PolicyFileError(f"policy file is damaged: its {name} is {quote(value)}")

    shape = header.get("observation", {}).get("shape") if isinstance(header.get("observation"), dict) else None
    if not isinstance(shape, list) or not all(is_count(d) and d > 0 for d in shape):
        raise bad("observation shape", shape)
    actions = header.get("actions")
    if not isinstance(actions, dict) or actions.get("kind") not in ACTION_KINDS or not is_count(actions.get("size")):
        raise bad("action space", actions)
    if actions["kind"] == "continuous":
        for bound in ("low", "high"):
            value = actions.get(bound)
            if not isinstance(value, list) or len(value) != actions["size"] or not all(map(is_number, value)):
                raise bad(f"action bound {bound}", value)
    if not isinstance(actions.get("squash", False), bool):
        raise bad("action squash", actions.get("squash"))
    epsilon = header.get("sample_epsilon")
    if epsilon is not None and not (is_number(epsilon) and 0 <= epsilon <= 1):
        raise bad("sample_epsilon", epsilon)
    hidden = header.get("hidden_size")
    if hidden is not None and not (is_count(hidden) and hidden > 0):
        raise bad("hidden_size", hidden)
    if not isinstance(header.get("normalize_obs"), bool):
        raise bad("normalize_obs", header.get("normalize_obs"))
    return header


class Policy:
    """A loaded policy: `policy(obs)` is the greedy action, `policy(obs, key)` a sampled one,
    for one observation (the env's shape, or flat) or a batch of them (leading axes).
    A recurrent policy takes `hidden=` (None at an episode's start) and returns a
    `PolicyStep`. Jitted: each new observation shape compiles once."""

    def __init__(self, header: dict[str, Any], network: Any, arrays: PolicyArrays):
        self.header = header
        self.network = network
        self.arrays = arrays
        self.obs_shape = tuple(header["observation"]["shape"])
        self.obs_size = math.prod(self.obs_shape)
        actions = header["actions"]
        self.discrete = actions["kind"] == "discrete"
        self.num_actions = actions["size"]
        self._bounds = None if self.discrete else (jnp.asarray(actions["low"], jnp.float32),
                                                   jnp.asarray(actions["high"], jnp.float32))
        self._squash = bool(actions.get("squash", False))  # files from before it was written clip
        self._epsilon = header["sample_epsilon"]
        self.hidden_size = header["hidden_size"]
        self._act = jax.jit(self._act_fn, static_argnames=("greedy",))

    @property
    def recurrent(self) -> bool:
        return self.hidden_size is not None

    def __repr__(self) -> str:
        kind = "recurrent " if self.recurrent else ""
        return (f"Policy({kind}{self.header['network']['class']}, env={self.header.get('env')!r}, "
                f"algo={self.header.get('algo')!r}, update={self.header.get('update')!r})")

    def initial_hidden(self, batch: int | None = None) -> jax.Array:
        """Zeros: the hidden state at an episode's start, for one observation or `batch`."""
        if not self.recurrent:
            raise TypeError("this policy is feed-forward: it has no hidden state")
        return jnp.zeros((self.hidden_size,) if batch is None else (batch, self.hidden_size), jnp.float32)

    def __call__(self, obs, key: jax.Array | None = None, *, hidden=None):
        obs = jnp.asarray(obs)
        lead = self._lead(obs.shape)
        if not self.recurrent:
            if hidden is not None:
                raise TypeError("this policy is feed-forward: call it without hidden=")
            return self._act(self.arrays, obs, None, key, greedy=key is None)
        hidden = jnp.zeros(lead + (self.hidden_size,), jnp.float32) if hidden is None else jnp.asarray(hidden)
        if tuple(hidden.shape) != lead + (self.hidden_size,):
            raise ValueError(f"hidden: expected shape {lead + (self.hidden_size,)} for observations of shape "
                             f"{tuple(obs.shape)}, got {tuple(hidden.shape)}")
        action, hidden = self._act(self.arrays, obs, hidden, key, greedy=key is None)
        return PolicyStep(action, hidden)

    def _lead(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """The batch axes of observations of `shape`: those before the env's shape, or before
        a flat observation's size."""
        rank = len(self.obs_shape)
        if tuple(shape[len(shape) - rank:]) == self.obs_shape and len(shape) >= rank:
            return tuple(shape[: len(shape) - rank])
        if shape and shape[-1] == self.obs_size:
            return tuple(shape[:-1])
        raise ValueError(f"obs: expected observations of shape {self.obs_shape} (or {self.obs_size} flat), "
                         f"with any batch axes before it; got {tuple(shape)}")

    def _act_fn(self, arrays: PolicyArrays, obs, hidden, key, *, greedy: bool):
        lead = self._lead(obs.shape)
        flat = normalize.normalize_obs(arrays.obs_stats, obs.reshape(lead + (self.obs_size,)))
        flat = flat.astype(jnp.float32)
        if self.recurrent:
            hidden, out = self.network.apply(arrays.params, hidden, flat)
        else:
            out = self.network.apply(arrays.params, flat)
        if greedy:
            action = networks.greedy_action(out.policy_out, self.discrete)
        else:
            policy_out = out.policy_out
            if self._epsilon is not None:  # action values: a sampled action is epsilon-greedy
                policy_out = networks.epsilon_greedy_logits(policy_out, jnp.float32(self._epsilon))
            action = networks.sample_action(key, policy_out, out.log_std, self.discrete)
        if self.discrete:
            action = action.astype(jnp.int32)
        else:
            action = networks.squashed(action, *self._bounds) if self._squash else jnp.clip(action, *self._bounds)
        return (action, hidden) if self.recurrent else action

    def greedy_fn(self) -> Callable[[jax.Array], jax.Array]:
        """The greedy action as a pure function of a batch of observations, the arrays held
        as constants: what `onnx_model` converts."""
        if self.recurrent:
            raise ValueError(RECURRENT_ONNX)
        arrays = self.arrays
        return lambda obs: self._act_fn(arrays, obs, None, None, greedy=True)


def params_shapes(network: Any, obs_size: int, hidden_size: int | None) -> Any:
    """The shapes and dtypes of `network`'s parameters for flat observations of `obs_size`
    (and a recurrent network's `hidden_size`), as the trainers initialise them; nothing is
    allocated."""
    obs = jax.ShapeDtypeStruct((1, obs_size), jnp.float32)
    key = jax.random.PRNGKey(0)
    if hidden_size is None:
        return jax.eval_shape(network.init, key, obs)
    return jax.eval_shape(network.init, key, jax.ShapeDtypeStruct((1, hidden_size), jnp.float32), obs)


def load_policy(source: str | Path | bytes) -> Policy:
    """The policy in a policy file (`rltui export RUN --policy FILE`), or in its bytes.
    PolicyFileError, one line, for a file that cannot be used."""
    if isinstance(source, (str, Path)):
        try:
            source = Path(source).read_bytes()
        except OSError as err:
            raise PolicyFileError(f"cannot read {source}: {err.strerror or err}") from None
    policy_file = read(source)
    header = _checked_header(policy_file.header)
    network = build_network(header.get("network"))
    size = math.prod(header["observation"]["shape"])
    try:
        params = params_shapes(network, size, header["hidden_size"])
    except Exception as err:  # noqa: BLE001 - flax raises several types for a network that does not fit
        raise PolicyFileError(f"policy file's network does not fit its spaces: {one_line(err)}") from None
    stats = jax.eval_shape(lambda: normalize.initial_stats((size,))) if header["normalize_obs"] else None
    return Policy(header, network, restore_arrays(policy_file.stored, PolicyArrays(params, stats)))


def onnx_model(policy: Policy) -> bytes:
    """`policy`'s greedy action as an ONNX model (its bytes): input `obs`, float32 of shape
    (batch, *observation shape); output `action`, int32 (batch,) or float32 (batch, size).
    ImportError when jax2onnx is not installed (the `ONNX_EXTRA` extra)."""
    fn = policy.greedy_fn()
    import jax2onnx

    _load_converters()
    # jax2onnx logs a line per constant whose type it leaves to the reader: noise to a user.
    quiet = logging.getLogger("onnx_ir")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        model = jax2onnx.to_onnx(fn, [("batch", *policy.obs_shape)], model_name="rltui_policy",
                                 input_names=["obs"], output_names=["action"])
    finally:
        quiet.setLevel(level)
    return model.SerializeToString()


def _load_converters() -> None:
    """On first use jax2onnx imports every converter it has, and its equinox ones build and
    compile models as they load: most of an export's time. A policy is plain JAX and flax, so
    only their converters load, where this jax2onnx's layout allows it; with another layout
    jax2onnx loads all of them itself."""
    try:
        from jax2onnx.plugins import plugin_system

        if plugin_system._already_imported_plugins:
            return
        root = Path(plugin_system.__file__).parent
        for tree in ("jax", "flax"):
            plugin_system._import_tree(root / tree, f"jax2onnx.plugins.{tree}")
        plugin_system._already_imported_plugins = True
    except (ImportError, AttributeError):
        return
