"""The text beside the watch view's picture: the step just taken, the episode so far, and
what the policy made of the state.
"""

from __future__ import annotations

import numpy as np
from rich.text import Text

from rltui.watch.player import Player

# A Q-value's bar, in characters: with its row's index and signed value it fits the panel
# (`ui.screens.watch.INFO_COLUMNS`) for values up to the thousands.
Q_BAR = 12


def describe_step(player: Player) -> Text:
    """The panel beside the picture: step, reward, return, action, the policy's view."""
    ep, view = player.episode, player.episode.last
    text = Text()
    text.append(f"{player.env_id}  {player.seed_label}\n", style="bold")
    text.append(f"mode    {'greedy' if player.greedy else 'sampled'}\n")
    if player.live is not None:
        text.append(f"policy  update {player.policy_update}\n")
        if player.live.problem:
            text.append(f"{player.live.problem}\n", style="yellow")
    text.append(f"episode {player.episode_count}  step {ep.step}\n")
    if view is None:
        text.append("(no step yet)\n", style="dim")
        return text
    q_values = view.q_values
    text.append(f"reward  {_signed(view.reward)}\nreturn  {ep.ret:.2f}\n"
                f"{'max Q' if q_values else 'V(s)':<8}{_signed(view.value)}\n")
    if view.probs is not None and q_values:
        text.append(f"action  {view.action}   Q(s, a)\n")
        values = np.asarray(view.probs[:12], float)
        low, high = float(values.min()), float(values.max())
        for i, q in enumerate(values):
            bar = "█" * int(round(Q_BAR * (q - low) / (high - low))) if high > low else ""
            text.append(f"  {i:>2} {_signed(q)} ", style="bold" if i == view.action else "")
            text.append(bar + "\n", style="cyan" if i == view.action else "dim")
        # The bars rank the actions: a long one beside none can be a small difference.
        text.append("  bars: Q above the lowest\n", style="dim")
    elif view.probs is not None:
        text.append(f"action  {view.action}\n")
        for i, p in enumerate(view.probs[:12]):
            bar = "█" * int(round(p * 20))
            text.append(f"  {i:>2} {p:5.2f} ", style="bold" if i == view.action else "")
            text.append(bar + "\n", style="cyan" if i == view.action else "dim")
    else:
        text.append("action  " + " ".join(f"{a:+.2f}" for a in np.atleast_1d(view.action)) + "\n")
        # A squashed policy's Gaussian is over u; the env receives tanh(u) scaled to its bounds.
        squashed = view.squashed
        text.append(("u mean  " if squashed else "mean    ") + " ".join(f"{a:+.2f}" for a in np.atleast_1d(view.mean))
                    + "\n")
        text.append(("u std   " if squashed else "std     ") + " ".join(f"{a:.2f}" for a in np.atleast_1d(view.std))
                    + "\n")
        if squashed:
            text.append("action = tanh(u), scaled\n", style="dim")
    if ep.done:
        text.append("episode over\n", style="yellow")
    return text


def _signed(value: float) -> str:
    """Three decimals with a sign; a value that rounds to zero is +0.000, never -0.000."""
    return f"{value if round(value, 3) else 0.0:+.3f}"
