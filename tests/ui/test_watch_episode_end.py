"""The watch view's (and --record's) frame that says an episode is over shows the state that
ended it, not the reset that follows; the next episode then starts from a reset state."""

from __future__ import annotations

import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct
from gymnax.environments import environment, spaces

from rltui.config.build import build_config
from rltui.render import Size
from rltui.watch.player import Player
from trainers.env_import import register_env

TINY = {"num_envs": 4, "num_steps": 16, "num_minibatches": 2, "update_epochs": 1, "hidden_sizes": [16],
        "total_timesteps": 6400}
SIZE = Size(60, 12)
LEGEND = re.compile(r"x ([+-]\d+\.\d+)  angle ([+-]\d+\.\d+)°")


def player_on(env, seed: int = 0) -> Player:
    """A Player with the untrained network of a tiny run on `env`."""
    from trainers.parallel import build

    config = build_config({**TINY, "env": env}, use_preset=False)
    parallel = build(config.static_config(), jax.local_devices()[:1])
    state = parallel.init(parallel.seed_keys(config.seed), config.dynamic_hparams())
    acting = jax.tree.map(lambda x: np.array(np.asarray(x)[0]), (state.params, state.obs_stats))
    return Player(config, acting, seed=seed, parallel=parallel)


def cart(player: Player) -> tuple[float, float]:
    """The cart's position and the pole's angle (degrees), as the picture's legend says them."""
    frame, failed = player.frame(SIZE)
    assert failed is None
    found = LEGEND.search(frame.legend.plain)
    assert found, frame.legend.plain
    return float(found.group(1)), float(found.group(2))


def ended(x: float, angle: float) -> bool:
    return abs(x) > 2.4 or abs(angle) > math.degrees(12 * 2 * math.pi / 360)


@pytest.mark.parametrize("env", ["CartPole-v1", "CartPole-v1-pomdp"])
def test_the_frame_that_ends_an_episode_shows_the_state_that_ended_it(env):
    player = player_on(env, seed=3)
    assert player.episode.step == 0 and not ended(*cart(player))
    for _ in range(3):  # episodes
        while not player.step().done:
            assert not ended(*cart(player)), f"step {player.episode.step} is past the limits and not done"
            assert player.episode.step < 500
        x, angle = cart(player)
        assert ended(x, angle) or player.episode.step == 500, (player.episode.step, x, angle)
        # The observation the frame is drawn with is that state's: CartPole's (x, x', angle, angle').
        obs = np.asarray(player._obs)
        assert np.isclose(obs[0], x, atol=0.01)
        assert np.isclose(math.degrees(obs[-2 if env == "CartPole-v1" else -1]), angle, atol=0.1)
        # The next step starts a new episode from a reset state (within ±0.05 of the centre).
        first = player.step()
        x, angle = cart(player)
        assert player.episode.step == 1 and not first.done
        assert abs(x) < 0.1 and abs(angle) < 6.0, (x, angle)


def test_a_recording_ends_each_episode_on_the_state_that_ended_it(tmp_path, monkeypatch):
    from rltui.watch import record as recording

    player = player_on("CartPole-v1", seed=1)
    shown = []
    compose = recording._compose

    def remember(frame, caption):  # composed as each frame is played: the player is at that frame
        shown.append((player.episode.step, player.episode.done, LEGEND.search(frame.legend.plain)))
        return compose(frame, caption)

    monkeypatch.setattr(recording, "_compose", remember)
    assert recording.record(player, 2, tmp_path / "two.svg").frames == len(shown)
    ends = [i for i, (_, done, _) in enumerate(shown) if done]
    assert len(ends) == 2 and ends[-1] == len(shown) - 1
    for i in ends:
        x, angle = (float(v) for v in shown[i][2].groups())
        assert ended(x, angle), shown[i]
    step, done, legend = shown[ends[0] + 1]  # the next episode's first frame: its reset state
    x, angle = (float(v) for v in legend.groups())
    assert step == 0 and not done and abs(x) <= 0.05 and abs(angle) <= math.degrees(0.05) + 0.05


# --- custom envs: the three ways rltui resets one --------------------------------------------


@struct.dataclass
class CounterState(environment.EnvState):
    count: jax.Array


@struct.dataclass
class CounterParams(environment.EnvParams):
    max_steps_in_episode: int = 100
    length: int = 3


class Counter(environment.Environment):
    """Counts its steps and ends at `length`: the observation is (count, 1). A gymnax env
    with gymnax's own step (its auto-reset)."""

    @property
    def default_params(self) -> CounterParams:
        return CounterParams()

    def step_env(self, key, state, action, params):
        state = CounterState(time=state.time + 1, count=state.count + 1)
        terminated = state.count >= params.length
        return self.get_obs(state), state, jnp.float32(1.0), terminated, {}

    def reset_env(self, key, params):
        state = CounterState(time=jnp.int32(0), count=jnp.int32(0))
        return self.get_obs(state), state

    def get_obs(self, state, params=None, key=None):
        return jnp.stack([state.count.astype(jnp.float32), jnp.float32(1.0)])

    def observation_space(self, params):
        return spaces.Box(0.0, 100.0, (2,), jnp.float32)

    def action_space(self, params):
        return spaces.Discrete(2)

    def render_text(self, state, params):
        return f"count {int(state.count)}"


class PlainCounter(Counter):
    """The same, duck-typed: its step never resets, so rltui's adapter resets it."""

    def step(self, key, state, action, params=None):
        obs, state, reward, terminated, _ = self.step_env(key, state, action, params or self.default_params)
        return obs, state, reward, terminated, jnp.bool_(False), {}

    def reset(self, key, params=None):
        return self.reset_env(key, params)


class SelfResettingCounter(PlainCounter):
    """The same, resetting itself inside its own step (the last observation in `info`): the
    state that ended the episode is gone, but not its observation. No picture of its own:
    the view draws its observation."""

    render_text = None

    def step(self, key, state, action, params=None):
        obs, stepped, reward, terminated, _ = self.step_env(key, state, action, params or self.default_params)
        fresh_obs, fresh = self.reset_env(key, params)
        state = jax.tree.map(lambda a, b: jnp.where(terminated, a, b), fresh, stepped)
        obs_out = jnp.where(terminated, fresh_obs, obs)
        return obs_out, state, reward, terminated, jnp.bool_(False), {"final_observation": obs}


@pytest.mark.parametrize("make", [Counter, PlainCounter, SelfResettingCounter])
def test_a_custom_env_s_last_frame_shows_its_last_state(make):
    player = player_on(register_env(make()))
    pictures = []
    for _ in range(2):  # episodes
        while True:
            view = player.step()
            frame, failed = player.frame(SIZE)
            assert failed is None
            pictures.append(frame.plain)
            if view.done:
                break
        assert player.episode.step == 3 and np.asarray(player._obs).tolist() == [3.0, 1.0]
    if make is SelfResettingCounter:
        assert "3" in pictures[2].split("\n")[0] and pictures[2] == pictures[5]  # obs[0] bar: 3
    else:
        assert pictures == ["count 1", "count 2", "count 3"] * 2
