"""What every renderer shares: the frame it returns, the env state unwrapped from rltui's
wrappers, and the fallback bar view of the observation vector."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
from rich.text import Text


def styled_line(cells) -> Text:
    """One line of text from (characters, style) cells, a run of equal style as one span:
    the view converts and draws every span of every frame, so fewer spans cost it less."""
    line = Text()
    run: list[str] = []
    run_style = None
    for chars, style in cells:
        style = style or ""
        if run and style != run_style:
            line.append("".join(run), style=run_style)
            run = []
        run.append(chars)
        run_style = style
    if run:
        line.append("".join(run), style=run_style)
    return line


@dataclasses.dataclass(frozen=True)
class Frame:
    """One picture: lines of styled text, a legend saying what the colours mean, and the
    scene they were drawn from (a `rltui.render.scene.Scene`; None where the picture is
    text, such as the bars), which a recording draws at pixel resolution."""

    lines: tuple[Text, ...]
    legend: Text = dataclasses.field(default_factory=Text)
    scene: Any = None

    @property
    def plain(self) -> str:
        return "\n".join(line.plain.rstrip() for line in self.lines)

    def text(self) -> Text:
        out = Text("\n").join(self.lines)
        if self.legend.plain:
            out.append("\n")
            out.append_text(self.legend)
        return out


@dataclasses.dataclass(frozen=True)
class Size:
    """Character cells: columns x rows."""

    columns: int
    rows: int


class Renderer:
    """Draws one env's state (or observation) as text, on the host: plain NumPy, no JAX,
    nothing compiled per frame. `min_size`: the smallest picture that still reads."""

    name = "renderer"
    min_size = Size(20, 6)

    def render(self, state: Any, obs: np.ndarray, size: Size) -> Frame:
        raise NotImplementedError


def unwrap_state(state: Any) -> Any:
    """The innermost env state inside rltui's and gymnax's wrappers (LogWrapper and the
    others keep the wrapped state as `env_state`)."""
    while hasattr(state, "env_state"):
        state = state.env_state
    return state


def innermost_env(env: Any) -> Any:
    """The env inside gymnax-style wrappers (each keeps the one it wraps as `_env`)."""
    seen = 0
    while hasattr(env, "_env") and seen < 32:
        env, seen = env._env, seen + 1
    return env


def scalar(value: Any) -> float:
    return float(np.asarray(value).reshape(-1)[0])


class BarRenderer(Renderer):
    """Each observation component as a horizontal bar around zero: the view of any env
    without a renderer of its own."""

    name = "observation bars"
    min_size = Size(24, 2)

    def render(self, state: Any, obs: np.ndarray, size: Size) -> Frame:
        values = np.asarray(obs, dtype=np.float64).reshape(-1)
        shown = values[: max(1, size.rows - 1)]
        scale = max(1e-9, float(np.max(np.abs(shown[np.isfinite(shown)]))) if np.isfinite(shown).any() else 1.0)
        label_width = len(str(len(values) - 1)) + 6
        value_width = 9
        half = max(2, (size.columns - label_width - value_width - 2) // 2)
        lines = []
        for i, value in enumerate(shown):
            line = Text(f"obs[{i}]".ljust(label_width), style="dim")
            if not math.isfinite(value):
                line.append(" " * half + "?" + " " * half)
            else:
                cells = int(round(abs(value) / scale * half))
                left = " " * (half - cells) + ("█" * cells if value < 0 else "")
                right = ("█" * cells if value > 0 else "") + " " * (half - (cells if value > 0 else 0))
                line.append(left.rjust(half), style="magenta")
                line.append("│", style="dim")
                line.append(right.ljust(half), style="cyan")
            line.append(f" {value:>{value_width}.3g}")
            lines.append(line)
        if len(values) > len(shown):
            lines.append(Text(f"... {len(values) - len(shown)} more components", style="dim"))
        legend = Text(f"observation, {len(values)} components (bar length relative to the largest, {scale:.3g})",
                      style="dim")
        return Frame(tuple(lines), legend)


class TextHookRenderer(Renderer):
    """A custom env's own text picture: `env.render_text(state, params) -> str`."""

    name = "the env's render_text"
    min_size = Size(1, 1)

    def __init__(self, env: Any, params: Any):
        self.env, self.params = env, params

    def render(self, state: Any, obs: np.ndarray, size: Size) -> Frame:
        text = str(self.env.render_text(unwrap_state(state), self.params))
        lines = [Text(line[: size.columns]) for line in text.splitlines()[: size.rows]]
        return Frame(tuple(lines))
