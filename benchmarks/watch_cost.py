"""What the dashboard's watch view costs training, and how fast it draws.

One in-process run (CartPole-v1, the default configuration, started as `rltui launch`
starts it) drives the real dashboard app headless (Textual's test driver: every frame is
composed, none is written to a terminal). Phases of --seconds each alternate: the watch
view closed, then open (key a; timed from its first frame, so building the policy's step
is not counted), --repeats times. Each phase's training SPS is env steps done over wall
seconds; an open phase also counts the frames the view put on screen. Printed: each
phase, the median of open/closed SPS over the pairs, and the view's frames per second.

    python benchmarks/watch_cost.py [--seconds 20] [--repeats 3] [--fps 10]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="length of each phase")
    parser.add_argument("--repeats", type=int, default=3, help="closed/open pairs")
    parser.add_argument("--fps", type=float, default=None, help="the view's playback speed (default: the dashboard's)")
    parser.add_argument("--env", default="CartPole-v1")
    args = parser.parse_args()

    from rltui.config.build import build_config
    from rltui.infra import runtime

    config = build_config({"env": args.env, "total_timesteps": 10**10, "checkpoint_minutes": 0})
    runtime.configure_jax(host_devices=config.devices, compile_cache=True)
    runtime.start_backend(runtime.resolve_cpu_threads(config))
    import jax

    from rltui.session.backend import JaxBackend
    from rltui.session.controller import TrainingSession
    from rltui.session.events import SessionState
    from rltui.ui.app import WATCH_KEY, DashboardApp
    from rltui.ui.screens.watch import LIVE_SPEED, SPEEDS, WatchScreen

    fps_set = LIVE_SPEED if args.fps is None else args.fps

    backend = JaxBackend(config.static_config(), config.seed, jax.local_devices()[:1])
    session = TrainingSession(backend, config.dynamic_hparams(), config.total_updates)

    def sample():
        return session.env_steps, time.monotonic()

    results = []
    with tempfile.TemporaryDirectory() as tmp:
        app = DashboardApp(session, config, Path(tmp))  # as launch runs it: its sampler, its refresh

        async def run() -> None:
            async with app.run_test(size=(120, 40)) as pilot:
                while session.state is not SessionState.RUNNING or session.updates_done < 20:
                    await pilot.pause(0.2)
                await pilot.pause(3.0)  # past the first chunks' start-up
                for round_ in range(args.repeats):
                    steps0, t0 = sample()
                    await pilot.pause(args.seconds)
                    steps1, t1 = sample()
                    closed = (steps1 - steps0) / (t1 - t0)
                    await pilot.press(WATCH_KEY)
                    screen = app.screen
                    assert isinstance(screen, WatchScreen)
                    screen.speed_index = min(range(len(SPEEDS)), key=lambda i: abs(SPEEDS[i] - fps_set))
                    while screen.shown < 1:
                        assert screen.failed is None, screen.failed
                        await pilot.pause(0.1)
                    shown0 = screen.shown
                    steps0, t0 = sample()
                    await pilot.pause(args.seconds)
                    steps1, t1 = sample()
                    opened = (steps1 - steps0) / (t1 - t0)
                    fps = (screen.shown - shown0) / (t1 - t0)
                    await pilot.press("q")
                    await pilot.pause(0.5)
                    results.append((closed, opened, fps))
                    print(f"round {round_ + 1}: closed {closed:,.0f} SPS, open {opened:,.0f} SPS "
                          f"(ratio {opened / closed:.3f}), view {fps:.1f} frames/s", flush=True)

        asyncio.run(run())
        session.stop()
        session.join(10)
    ratios = [o / c for c, o, _ in results]
    print(f"open/closed training SPS, median of {len(ratios)}: {statistics.median(ratios):.3f} "
          f"(each: {', '.join(f'{r:.3f}' for r in ratios)}); view frames/s, median: "
          f"{statistics.median(f for _, _, f in results):.1f} at a set speed of {fps_set:g}")


if __name__ == "__main__":
    main()
