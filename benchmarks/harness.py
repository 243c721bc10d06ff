"""A small timing harness: repeat a measurement, report min / median / max."""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable


def repeat(measure: Callable[[], float], repeats: int) -> dict[str, float]:
    values = [measure() for _ in range(repeats)]
    return {"min": min(values), "median": statistics.median(values), "max": max(values), "values": values}


def fmt(stats: dict[str, float], unit: str = "") -> str:
    return f"{stats['median']:>12,.0f}{unit}  (min {stats['min']:,.0f}, max {stats['max']:,.0f})"


class StepClock:
    """A session listener that timestamps every snapshot's env steps, so that SPS over a
    window is measured the same way in every benchmark that runs the session."""

    def __init__(self):
        self.marks: list[tuple[float, int]] = []
        self.lock = threading.Lock()

    def on_state(self, state, message):
        pass

    def on_event(self, event):
        pass

    def on_metrics(self, snapshot):
        with self.lock:
            self.marks.append((time.monotonic(), snapshot.env_steps))

    def first_metrics(self) -> bool:
        with self.lock:
            return bool(self.marks)

    def sps_between(self, start: float, end: float) -> float:
        with self.lock:
            window = [m for m in self.marks if start <= m[0] <= end]
        if len(window) < 2:
            raise RuntimeError("too few chunks in the window; use more --seconds")
        (t0, s0), (t1, s1) = window[0], window[-1]
        return (s1 - s0) / (t1 - t0)
