"""The Player: a policy acting in one env on one device, step by step.

Steps are computed on the device a block at a time (BLOCK_STEPS steps per device call, fewer
where an episode ends); the picture is drawn from the env state on the host (rltui.render),
so a frame costs some string building, and a device call comes once a block.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
from typing import Any, NamedTuple, Protocol

import numpy as np

from rltui.render import Frame, Size, render_safely, renderer_for
from rltui.watch.params import PolicyMismatch, acting_template, adopt_params


class StepView(NamedTuple):
    """What the view shows beside the picture, for the step just taken (host values)."""

    action: Any  # int (discrete) or array (continuous): what the env received
    probs: np.ndarray | None  # discrete: the policy's action probabilities (or, see below, Q-values)
    mean: np.ndarray | None  # continuous: the Gaussian's mean and std
    std: np.ndarray | None
    value: float  # V(s) of the state the action was chosen in (max_a Q(s, a) for a Q-learner)
    reward: float
    done: bool
    q_values: bool = False  # `probs` holds the Q-values of the actions (a value-based algorithm)
    squashed: bool = False  # continuous: `mean` and `std` are of u, and the action is tanh(u) scaled (SAC)


@dataclasses.dataclass
class Episode:
    seed_index: int
    step: int = 0
    ret: float = 0.0
    done: bool = False
    last: StepView | None = None


def _on_own_device(method):
    """Run a Player method with its device as JAX's default, so that everything it makes
    (keys, env states, hidden states) lives there."""

    @functools.wraps(method)
    def on_device(self, *args, **kwargs):
        import jax

        with jax.default_device(self.device):
            return method(self, *args, **kwargs)

    return on_device


BLOCK_STEPS = 16  # steps per device call


class _Ahead(NamedTuple):
    """A step computed ahead: what it showed, and the state after it (host arrays): where the
    step ended the episode, the state that ended it (the env is not reset within a block)."""

    view: StepView
    state: Any
    obs: np.ndarray
    hidden: Any
    key: np.ndarray


def _index(tree, i: int):
    import jax

    return jax.tree.map(lambda x: np.asarray(x[i]), tree)


def _fetch(tree):
    """Device results as host arrays. Waits by polling, never inside a blocking transfer
    that could hold the interpreter lock while training's chunk runs: the UI thread stays
    live whatever the device is doing."""
    import time

    import jax

    leaves = [leaf for leaf in jax.tree.leaves(tree) if hasattr(leaf, "is_ready")]
    while not all(leaf.is_ready() for leaf in leaves):
        time.sleep(0.002)
    return jax.device_get(tree)


class LiveParams(Protocol):
    """Where a Player on a running session gets newer parameters (`watch.live.LivePolicy`):
    asked for as an episode ends, taken as the next begins."""

    problem: str | None  # why the latest copy could not be played; the view says it

    def ask(self) -> None: ...

    def take(self, wait: float | None = None) -> Any: ...  # a ParamsSnapshot, or None


class Player:
    """A policy acting in one env, step by step. `greedy` picks the most probable action
    (the mean, continuous); otherwise actions are sampled. `acting` is (params, obs_stats)
    as the trainer holds them; with `live` (LiveParams) each new episode takes the run's
    latest parameters."""

    def __init__(self, config, acting, seed: int = 0, greedy: bool = True, live: LiveParams | None = None,
                 policy_update: int | None = None, parallel=None, template=None, device=None):
        import jax

        from trainers.parallel import build

        self.device = device if device is not None else jax.local_devices()[0]
        if parallel is None:
            parallel = build(config.static_config(), [self.device])
        self.trainer = trainer = parallel.trainer
        self.spec = trainer.spec
        self.env_id = config.env
        # The agents `next_seed` cycles through: each seed of each member (member-major).
        self.num_agents = trainer.static.num_agents
        self.seeds_per_member = config.num_seeds
        self.num_members = trainer.static.num_members
        self.first_seed = config.seed
        self.greedy = greedy
        # A Q-learner's sampled mode explores epsilon-greedily with its final epsilon.
        self.explore_epsilon = float(getattr(config, "eps_end", 0.0))
        self.seed = seed
        self.episode_count = 0
        self._acting_all = jax.device_put(acting, self.device)  # once, not with every step
        self.live = live
        self.policy_update = policy_update  # the update whose parameters play (live)
        if live is not None and template is None:
            template = acting_template(config, parallel)
        self._template = template
        self.renderer = renderer_for(config.env, self.spec.env, self.spec.params, self.spec.obs_shape)
        self._reset = jax.jit(self._reset_fn)
        self._block = jax.jit(self._block_fn, static_argnames=("greedy", "steps"))
        # Steps computed ahead, one block per device call: where training holds the device's
        # compute threads (a CPU run with one XLA thread), every call waits for the chunk in
        # flight, so the view makes few and large ones. Dropped when the mode or seed changes.
        self._ahead: collections.deque[_Ahead] = collections.deque()
        self.episode = Episode(0)
        self.seed_index = 0
        self.new_episode()

    @property
    def greedy(self) -> bool:
        return self._greedy

    @greedy.setter
    def greedy(self, value: bool) -> None:
        self._greedy = bool(value)
        if hasattr(self, "_ahead"):
            self._ahead.clear()

    # --- compiled pieces (one device call each) -------------------------------------------
    def _reset_fn(self, seed, episode):
        import jax

        base = jax.random.fold_in(jax.random.PRNGKey(seed), episode)
        key, reset_key = jax.random.split(base)
        obs, env_state = self.spec.env.reset(reset_key, self.spec.params)
        return env_state, obs, self.trainer.initial_hidden(1), key

    def _step_fn(self, acting, env_state, obs, hidden, key, *, greedy: bool):
        import jax
        import jax.numpy as jnp

        from trainers import networks
        from trainers.rollout import env_action
        from trainers.step_keys import NoResetKey

        act_key, step_key = jax.random.split(key)
        hidden, out = self.trainer.act_step(acting, hidden, obs[None])
        policy_out, value = out.policy_out[0], out.value[0]
        # log_std is per action, or per row when the std depends on the state.
        log_std = out.log_std if self.spec.discrete else jnp.broadcast_to(out.log_std, out.policy_out.shape)[0]
        values = self.trainer.acts_by_values
        if greedy:
            action = networks.greedy_action(policy_out, self.spec.discrete)
        elif values:  # epsilon-greedy at the exploration rate the run ends with
            logits = networks.epsilon_greedy_logits(policy_out, jnp.float32(self.explore_epsilon))
            action = networks.sample_action(act_key, logits, log_std, True)
        else:
            action = networks.sample_action(act_key, policy_out, log_std, self.spec.discrete)
        # Without the env's auto-reset: the state after a step that ends the episode is the
        # one that ended it, for the frame that says so; `step` resets before the next one.
        # What the env receives (continuous: clipped, or squashed and scaled, to its bounds) is
        # the action shown.
        action = env_action(self.spec, action)
        _, env_state2, reward, terminated, truncated, info = self.spec.env.step(
            NoResetKey(step_key), env_state, action, self.spec.params
        )
        # The step's observation, and the last one where an env resets itself in its own step.
        obs2 = info["final_observation"]
        probs = (policy_out if values else jax.nn.softmax(policy_out)) if self.spec.discrete else None
        std = None if self.spec.discrete else jnp.exp(log_std)
        return (env_state2, obs2, hidden, action, probs, policy_out, std, value, reward,
                jnp.logical_or(terminated, truncated))

    def _block_fn(self, acting_all, seed_index, env_state, obs, hidden, key, *, greedy: bool, steps: int):
        """`steps` steps from one state, each one's outputs and the state after it."""
        import jax

        acting = acting_all if self.num_agents == 1 else jax.tree.map(lambda x: x[seed_index], acting_all)

        def one(carry, _):
            env_state, obs, hidden, key = carry
            key, step_key = jax.random.split(key)
            out = self._step_fn(acting, env_state, obs, hidden, step_key, greedy=greedy)
            return (out[0], out[1], out[2], key), (*out, key)

        _, outs = jax.lax.scan(one, (env_state, obs, hidden, key), None, length=steps)
        return outs

    # --- host side ----------------------------------------------------------------------
    @_on_own_device
    def new_episode(self) -> None:
        if self.live is not None:
            self._take_latest()
        self._ahead.clear()
        out = _fetch(self._reset(np.int32(self.seed), np.int32(self.episode_count)))
        self._state, self._obs, self._hidden, self._key = out
        self.episode = Episode(self.seed_index)
        self.episode_count += 1

    @_on_own_device
    def _compute_ahead(self, steps: int = BLOCK_STEPS) -> None:
        outs = _fetch(self._block(self._acting_all, np.int32(self.seed_index), self._state, self._obs,
                                  self._hidden, self._key, greedy=self.greedy, steps=steps))
        env_state, obs, hidden, action, probs, mean, std, value, reward, done, key = outs
        discrete = self.spec.discrete
        for i in range(steps):
            def at(tree, i=i):
                return None if tree is None else _index(tree, i)

            view = StepView(
                action=int(action[i]) if discrete else np.asarray(action[i]),
                probs=None if probs is None else np.asarray(probs[i]),
                mean=None if discrete else np.asarray(mean[i]),
                std=None if std is None else np.asarray(std[i]),
                value=float(value[i]), reward=float(reward[i]), done=bool(done[i]),
                q_values=self.trainer.acts_by_values, squashed=self.spec.squash_actions,
            )
            self._ahead.append(_Ahead(view, at(env_state), np.asarray(obs[i]), at(hidden), np.asarray(key[i])))
            if view.done:
                break  # this state ended the episode; `step` resets before the next one

    def step(self) -> StepView:
        if self.episode.done:
            self.new_episode()
        if not self._ahead:
            self._compute_ahead()
        ahead = self._ahead.popleft()
        self._state, self._obs, self._hidden, self._key = ahead.state, ahead.obs, ahead.hidden, ahead.key
        view = ahead.view
        self.episode.step += 1
        self.episode.ret += view.reward
        self.episode.done = view.done
        self.episode.last = view
        if view.done and self.live is not None:
            self.live.ask()  # copied at the next chunk boundary, while this frame shows
        return view

    def _take_latest(self) -> None:
        snapshot = self.live.take()
        if snapshot is None or snapshot.update == self.policy_update:
            return
        try:
            import jax

            self._acting_all = jax.device_put(adopt_params(self._template, snapshot.params, snapshot.obs_stats),
                                              self.device)
        except PolicyMismatch as err:
            self.live.problem = str(err)
            return
        self.policy_update = snapshot.update

    def frame(self, size: Size) -> tuple[Frame, str | None]:
        return render_safely(self.renderer, self._state, np.asarray(self._obs), size)

    @property
    def seed_label(self) -> str:
        member, seed = divmod(self.seed_index, self.seeds_per_member)
        label = f"seed {self.first_seed + seed}"
        if self.num_members > 1:
            label = f"member {member}" + (f", {label}" if self.seeds_per_member > 1 else "")
        return label + (f" ({self.seed_index + 1} of {self.num_agents})" if self.num_agents > 1 else "")

    def start_agent(self, seed_index: int) -> None:
        """Play agent `seed_index` (member-major) from its first episode."""
        self.seed_index = seed_index
        self.episode_count = 0
        self.new_episode()

    def next_seed(self) -> None:
        self.seed_index = (self.seed_index + 1) % self.num_agents
        self.new_episode()
