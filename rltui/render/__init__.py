"""Pictures of environments as text, drawn on the host from the env state and observation.

`renderer_for(env_id, env, params, obs_shape)` picks one: a custom env's own
`render_text(state, params) -> str` when it has one (the documented hook), a built-in
renderer for the env, an image observation (height x width x channels) as an image, else
the bar view of the observation vector, which every env has. A frame carries the scene it
was drawn from where it has one (`rltui.render.scene`), which recordings draw in pixels.
A renderer is plain NumPy: nothing is compiled per frame.
"""

from __future__ import annotations

from typing import Any

from rltui.render.base import BarRenderer, Frame, Renderer, Size, TextHookRenderer, innermost_env, unwrap_state
from rltui.render.classic import AcrobotRenderer, CartPoleRenderer, MountainCarRenderer, PendulumRenderer
from rltui.render.grids import (
    MINATAR_CHANNELS,
    BoardRenderer,
    ChannelGridRenderer,
    FourRoomsRenderer,
    PointsRenderer,
)
from rltui.render.images import ImageObsRenderer, is_image_shape

__all__ = ["BarRenderer", "Frame", "Renderer", "Size", "renderer_for", "too_small", "unwrap_state"]

RENDER_HOOK = "render_text"


def renderer_for(env_id: str, env: Any = None, params: Any = None, obs_shape: tuple[int, ...] = ()) -> Renderer:
    base_id = env_id.removesuffix("-pomdp")
    inner = innermost_env(env) if env is not None else None
    if inner is not None and callable(getattr(inner, RENDER_HOOK, None)):
        return TextHookRenderer(inner, params)
    if base_id == "CartPole-v1":
        return CartPoleRenderer()
    if base_id == "Acrobot-v1":
        return AcrobotRenderer()
    if base_id == "Pendulum-v1":
        return PendulumRenderer()
    if base_id == "MountainCar-v0":
        return MountainCarRenderer(goal=0.5)
    if base_id == "MountainCarContinuous-v0":
        return MountainCarRenderer(goal=0.45)
    if base_id in MINATAR_CHANNELS:
        return ChannelGridRenderer(obs_shape, MINATAR_CHANNELS[base_id])
    if base_id in ("Catch-bsuite", "DeepSea-bsuite") and len(obs_shape) == 2:
        return BoardRenderer(obs_shape)
    if base_id == "FourRooms-misc" and inner is not None:
        return FourRoomsRenderer(inner)
    if base_id in ("PointRobot-misc", "Reacher-misc", "Swimmer-misc"):
        return PointsRenderer()
    if base_id == "Pong-misc" and len(obs_shape) == 3:
        return ChannelGridRenderer(obs_shape, ("paddles", "ball", "trail"))
    if is_image_shape(tuple(obs_shape)):  # Navix's grids, pixels: any height x width x channels
        return ImageObsRenderer(tuple(obs_shape))
    return BarRenderer()


def too_small(renderer: Renderer, size: Size) -> str | None:
    """What to say when `size` is smaller than the renderer needs; None when it fits."""
    need = renderer.min_size
    if size.columns >= need.columns and size.rows >= need.rows:
        return None
    return (f"the picture needs {need.columns}x{need.rows} characters; this view has {size.columns}x{size.rows}: "
            "enlarge the terminal")


def render_safely(renderer: Renderer, state: Any, obs: Any, size: Size) -> tuple[Frame, str | None]:
    """The frame, falling back to the bar view (and saying why) when the renderer fails on
    this state: a picture must never end the view."""
    try:
        return renderer.render(state, obs, size), None
    except Exception as err:  # noqa: BLE001 - any renderer failure falls back to the bars
        return BarRenderer().render(state, obs, size), f"{renderer.name} failed ({type(err).__name__}: {err})"
