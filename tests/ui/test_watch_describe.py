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
