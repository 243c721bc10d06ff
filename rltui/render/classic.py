"""Classic control as line drawings (braille dots in the terminal): the cart and pole, the acrobot's
links, the pendulum, the hill and the car."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from rich.text import Text

from rltui.render.base import Size, scalar, unwrap_state
from rltui.render.scene import Box, Scene, SceneBuilder, SceneRenderer


class CartPoleRenderer(SceneRenderer):
    name = "cart and pole"
    min_size = Size(24, 6)

    def scene(self, state: Any, obs: np.ndarray) -> Scene:
        inner = unwrap_state(state)
        x, theta = scalar(inner.x), scalar(inner.theta)
        view = SceneBuilder(Box(-2.6, 2.6, -0.3, 1.3))
        view.line(-2.4, 0, 2.4, 0, "dim")  # the track, to the limits where the episode ends
        view.line(-2.4, 0, -2.4, 0.1, "red")
        view.line(2.4, 0, 2.4, 0.1, "red")
        w, h = 0.25, 0.15
        view.polyline([(x - w, 0.02), (x + w, 0.02), (x + w, 0.02 + 2 * h), (x - w, 0.02 + 2 * h)], "cyan",
                      closed=True)
        top = 0.02 + 2 * h
        view.line(x, top, x + math.sin(theta), top + math.cos(theta), "yellow")
        legend = Text(f"x {x:+.2f}  angle {math.degrees(theta):+.1f}°  (ends past ±2.4 or ±12°)", style="dim")
        return view.scene(legend)


class AcrobotRenderer(SceneRenderer):
    name = "acrobot links"
    min_size = Size(16, 8)

    def scene(self, state: Any, obs: np.ndarray) -> Scene:
        inner = unwrap_state(state)
        a1, a2 = scalar(inner.joint_angle1), scalar(inner.joint_angle2)
        view = SceneBuilder(Box(-2.2, 2.2, -2.2, 2.2))
        view.line(-2.2, 1.0, 2.2, 1.0, "green")  # the tip must rise above this line
        p1 = (math.sin(a1), -math.cos(a1))
        p2 = (p1[0] + math.sin(a1 + a2), p1[1] - math.cos(a1 + a2))
        view.line(0, 0, *p1, "cyan")
        view.line(*p1, *p2, "yellow")
        view.circle(0, 0, 0.08, "white")
        legend = Text(f"angles {math.degrees(a1):+.0f}° {math.degrees(a2):+.0f}°  (goal: tip above the green line)",
                      style="dim")
        return view.scene(legend)


class PendulumRenderer(SceneRenderer):
    name = "pendulum"
    min_size = Size(16, 8)

    def scene(self, state: Any, obs: np.ndarray) -> Scene:
        inner = unwrap_state(state)
        theta = scalar(inner.theta)
        torque = scalar(getattr(inner, "last_u", 0.0))
        view = SceneBuilder(Box(-1.3, 1.3, -1.3, 1.3))
        tip = (-math.sin(theta), math.cos(theta))  # theta 0: upright
        view.line(0, 0, *tip, "yellow")
        view.circle(*tip, 0.08, "yellow")
        view.circle(0, 0, 0.05, "white")
        if abs(torque) > 1e-3:  # the last torque, as an arc whose length is its size (at most 2)
            sweep = torque / 2.0 * math.pi * 0.75
            arc = [(0.35 * math.cos(math.pi / 2 + sweep * i / 12), 0.35 * math.sin(math.pi / 2 + sweep * i / 12))
                   for i in range(13)]
            view.polyline(arc, "magenta")
        legend = Text(f"angle {math.degrees(_wrap(theta)):+.0f}° (0 = upright)  torque {torque:+.2f}", style="dim")
        return view.scene(legend)


def _wrap(angle: float) -> float:
    return (angle + math.pi) % (2 * math.pi) - math.pi


class MountainCarRenderer(SceneRenderer):
    name = "hill and car"
    min_size = Size(24, 6)

    def __init__(self, goal: float = 0.5):
        self.goal = goal

    def scene(self, state: Any, obs: np.ndarray) -> Scene:
        inner = unwrap_state(state)
        position, velocity = scalar(inner.position), scalar(inner.velocity)
        view = SceneBuilder(Box(-1.2, 0.6, -0.05, 1.15))
        height = lambda x: 0.45 * math.sin(3 * x) + 0.55  # the env's hill
        xs = np.linspace(-1.2, 0.6, 160)  # joined by lines: smooth at any size
        view.polyline([(x, height(x)) for x in xs], "green")
        view.line(self.goal, height(self.goal), self.goal, height(self.goal) + 0.2, "red")
        view.circle(position, height(position) + 0.05, 0.05, "cyan")
        legend = Text(f"position {position:+.3f}  velocity {velocity:+.4f}  (flag at {self.goal:g})", style="dim")
        return view.scene(legend)
