"""What the dashboard costs, in one run, on CartPole-v1 with the default configuration:

  (a) env steps per second with the dashboard open (App.run_test with the headless
      driver: everything but the terminal writes) against headless (the `--no-ui`
      progress listener alone). One session trains throughout; a dashboard opens and
      closes over it in rounds of headless, dashboard, dashboard, headless windows of
      --seconds each, so drifts in machine load cancel. Compile and warm-up are
      excluded; the ratio is the median over rounds (target >= 0.95). Also reported:
      the CPU the UI thread used.
  (b) key press to screen while training runs at full speed: from pressing p to the
      first screen update that shows "pausing..." (or already "paused"), the same for
      the press that resumes, and from pressing e to the editor on screen; p50/p95 in
      ms (target p95 < 50 ms).

    python benchmarks/dashboard.py [--seconds 4] [--repeats 5] [--presses 20]

Uses JAX's persistent compilation cache, as `rltui launch` does. On a small shared
machine the SPS of a few-second window varies by +-20% from other load: use more
--repeats before reading much into one ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import StepClock


def wait(predicate, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("the session did not start")
        time.sleep(0.01)


class ScreenWatch:
    """Timestamps the first screen update whose terminal output contains one of `markers`. The
    headless driver does not write to a terminal, but the app still composes each update
    and hands it to `_display`: that is the moment a terminal would get it."""

    def __init__(self, app):
        self.app = app
        self.markers: tuple[str, ...] = ()
        self.seen_at: float | None = None
        original = app._display

        def display(screen, renderable):
            if self.markers and self.seen_at is None and renderable is not None:
                output = renderable.render_segments(app.console)
                if any(marker in output for marker in self.markers):
                    self.seen_at = time.perf_counter()
            return original(screen, renderable)

        app._display = display

    def expect(self, *markers: str) -> None:
        self.markers, self.seen_at = markers, None


async def press_latency(pilot, watch: ScreenWatch, key: str, *markers: str) -> float:
    """Milliseconds from the key press to the first screen update showing a marker."""
    watch.expect(*markers)
    started = time.perf_counter()
    await pilot.press(key)
    deadline = time.monotonic() + 5
    while watch.seen_at is None:
        if time.monotonic() > deadline:
            raise TimeoutError(f"none of {markers} reached the screen")
        await asyncio.sleep(0.001)
    return (watch.seen_at - started) * 1000


async def until(predicate, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("the dashboard did not get there")
        await asyncio.sleep(0.01)


async def open_dashboard(session, config, run_dir: Path, body) -> None:
    """Open a dashboard over the running session, run `body(app, pilot)`, quit it
    (without stopping the session: the quit dialog is bypassed)."""
    from rltui.ui.app import DashboardApp

    app = DashboardApp(session, config, run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        await body(app, pilot)
        app.exit()


def measure_sps(clock: StepClock, seconds: float, settle: float) -> float:
    start = time.monotonic() + settle
    time.sleep(settle + seconds)
    return clock.sps_between(start, time.monotonic())


async def measure_sps_async(clock: StepClock, seconds: float, settle: float) -> float:
    start = time.monotonic() + settle
    await asyncio.sleep(settle + seconds)
    return clock.sps_between(start, time.monotonic())


async def key_latencies(app, pilot, presses: int) -> dict[str, list[float]]:
    from rltui.session import SessionState
    from rltui.ui.screens import HParamEditor

    watch = ScreenWatch(app)
    out: dict[str, list[float]] = {"p (pause)": [], "p (resume)": [], "e (editor)": []}
    await until(lambda: app.latest is not None)
    for _ in range(presses):
        out["p (pause)"].append(await press_latency(pilot, watch, "p", "pausing...", " paused "))
        await until(lambda: app.session_state is SessionState.PAUSED)
        await asyncio.sleep(0.2)  # a person reads the screen before the next key
        out["p (resume)"].append(await press_latency(pilot, watch, "p", "resuming...", " running "))
        await until(lambda: app.session_state is SessionState.RUNNING)
        await asyncio.sleep(0.2)  # training at full speed between presses
        out["e (editor)"].append(await press_latency(pilot, watch, "e", "Applied at the next chunk"))
        await pilot.press("escape")
        await until(lambda: not isinstance(app.screen, HParamEditor))
        await asyncio.sleep(0.2)
    return out


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=4.0, help="length of each measurement window")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds after the first chunk before measuring")
    parser.add_argument("--repeats", type=int, default=5, help="rounds of headless, dashboard x2, headless")
    parser.add_argument("--presses", type=int, default=20, help="key presses of each kind for (b)")
    args = parser.parse_args()

    from rltui.config.build import RunConfig
    from rltui.infra import runtime

    config = RunConfig(total_timesteps=10**10)  # never finishes during the measurement
    runtime.configure_jax(host_devices=config.devices, compile_cache=True)
    import jax
    from rich.console import Console

    from rltui.headless import ProgressListener
    from rltui.session import TrainingSession
    from rltui.session.backend import JaxBackend

    print(f"jax {jax.__version__}, {jax.devices()[0].platform}, {os.cpu_count()} cores; CartPole-v1, "
          f"{config.num_envs} envs x {config.num_steps} steps, chunk_seconds {config.chunk_seconds}")
    # One session for both modes: the dashboard opens and closes over it, alternating with
    # headless windows, so slow drifts in machine load hit both modes alike.
    session = TrainingSession(JaxBackend(config.static_config(), config.seed), config.dynamic_hparams(),
                              config.total_updates, chunk_seconds=config.chunk_seconds)
    clock = StepClock()
    progress = ProgressListener(Console(file=io.StringIO()), config.total_updates * config.steps_per_update)
    session.add_listener(progress)  # what `--no-ui` attaches; it stays attached in both modes
    session.add_listener(clock)
    headless, dashboard, ui_cpu, ratios, latencies = [], [], [], [], {}
    with progress, tempfile.TemporaryDirectory() as run_dir:
        session.start()
        wait(clock.first_metrics)
        time.sleep(args.warmup)
        async def sps_with_dashboard(app, pilot):
            cpu = time.thread_time()
            dashboard.append(await measure_sps_async(clock, args.seconds, settle=1.0))
            ui_cpu.append((time.thread_time() - cpu) / (args.seconds + 1.0))

        for repeat in range(args.repeats):
            # ABBA (headless, dashboard, dashboard, headless): a linear drift in machine
            # load cancels out of each round's ratio.
            headless.append(measure_sps(clock, args.seconds, settle=0.5))
            for _ in range(2):
                asyncio.run(open_dashboard(session, config, Path(run_dir), sps_with_dashboard))
            headless.append(measure_sps(clock, args.seconds, settle=0.5))
            ratios.append(sum(dashboard[-2:]) / sum(headless[-2:]))
            print(f"  round {repeat + 1}: headless {headless[-2]:>8,.0f} {headless[-1]:>8,.0f} SPS   dashboard "
                  f"{dashboard[-2]:>8,.0f} {dashboard[-1]:>8,.0f} SPS   ratio {ratios[-1]:.2f}   "
                  f"(UI thread {statistics.mean(ui_cpu[-2:]):.0%} of a core)", flush=True)

        async def keys(app, pilot):
            latencies.update(await key_latencies(app, pilot, args.presses))

        asyncio.run(open_dashboard(session, config, Path(run_dir), keys))
        session.stop()
        session.join(30)

    print()
    print(
        f"(a) SPS headless  {statistics.median(headless):>10,.0f}"
        f"  median of {len(headless)} windows of {args.seconds:g} s"
    )
    print(f"    SPS dashboard {statistics.median(dashboard):>10,.0f}")
    print(f"    ratio dashboard/headless: median of rounds {statistics.median(ratios):.3f} "
          f"(rounds {', '.join(f'{r:.2f}' for r in ratios)}; target >= 0.95)")
    print(f"    the UI thread used {statistics.median(ui_cpu):.1%} of one core (median); {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f} at the end")
    print("(b) key press -> screen, training at full speed (target p95 < 50 ms)")
    for key, values in latencies.items():
        print(f"    {key:<11} p50 {percentile(values, 50):6.1f} ms  p95 {percentile(values, 95):6.1f} ms  "
              f"max {max(values):6.1f} ms  (n={len(values)})")


if __name__ == "__main__":
    main()
