"""A small timing harness: repeat a measurement, report min / median / max."""

from __future__ import annotations

import statistics
from collections.abc import Callable


def repeat(measure: Callable[[], float], repeats: int) -> dict[str, float]:
    values = [measure() for _ in range(repeats)]
    return {"min": min(values), "median": statistics.median(values), "max": max(values), "values": values}


def fmt(stats: dict[str, float], unit: str = "") -> str:
    return f"{stats['median']:>12,.0f}{unit}  (min {stats['min']:,.0f}, max {stats['max']:,.0f})"
