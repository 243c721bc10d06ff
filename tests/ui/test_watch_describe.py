"""The watch panel's text beside the picture."""

from types import SimpleNamespace

import numpy as np

from rltui.watch.describe import describe_step


def test_a_reward_or_value_that_rounds_to_zero_reads_plus_zero():
    view = SimpleNamespace(reward=-0.0001, value=-0.0004, action=1, probs=np.array([0.25, 0.75]), q_values=False)
    player = SimpleNamespace(env_id="CartPole-v1", seed_label="seed 0", greedy=True, live=None, episode_count=1,
                             episode=SimpleNamespace(last=view, step=3, ret=-0.0001, done=False))
    text = describe_step(player).plain
    assert "reward  +0.000" in text and "V(s)    +0.000" in text, text
    assert "-0.000" not in text
    view.reward, view.value = -0.25, 1.5
    text = describe_step(player).plain
    assert "reward  -0.250" in text and "V(s)    +1.500" in text, text


def test_a_squashed_policy_names_its_gaussian_as_that_of_u_not_of_the_action():
    view = SimpleNamespace(reward=0.5, value=1.0, action=np.array([1.9]), probs=None, q_values=False,
                           mean=np.array([1.8]), std=np.array([0.3]), squashed=True)
    player = SimpleNamespace(env_id="Pendulum-v1", seed_label="seed 0", greedy=True, live=None, episode_count=1,
                             episode=SimpleNamespace(last=view, step=3, ret=0.5, done=False))
    text = describe_step(player).plain
    assert "u mean  +1.80" in text and "u std   0.30" in text and "action = tanh(u), scaled" in text, text
    view.squashed = False  # PPO's Gaussian is the action's own
    text = describe_step(player).plain
    assert "mean    +1.80" in text and "u mean" not in text and "tanh" not in text, text


def test_q_value_rows_fit_the_panel_without_wrapping():
    from rltui.ui.screens.watch import INFO_COLUMNS

    view = SimpleNamespace(reward=1.0, value=105.25, action=0, probs=np.array([105.25, -1234.5, 70.93]), q_values=True)
    player = SimpleNamespace(env_id="CartPole-v1", seed_label="seed 0", greedy=True, live=None, episode_count=1,
                             episode=SimpleNamespace(last=view, step=3, ret=3.0, done=False))
    rows = [line for line in describe_step(player).plain.splitlines() if "█" in line]
    assert len(rows) == 2 and all(len(row) <= INFO_COLUMNS for row in rows), rows
