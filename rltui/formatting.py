"""Compact number and time formats, and series thinned to a panel's width. Plain Python
and NumPy: the headless display (which never imports textual) uses it too."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from rltui.infra.read_limits import size_text
from trainers.hparams import TRAINER_KEYS
from trainers.keys import Switch

# Hyperparameters that are switches: 1.0 or 0.0 in the trainer, true or false to the user.
SWITCHES = frozenset(key.name for key in TRAINER_KEYS if isinstance(key.rule, Switch))


def fmt_value(value: float | None, digits: int = 4) -> str:
    """A metric value in few cells: `digits` significant digits, small and large numbers
    as 2.5e-4 rather than 0.00025, nan/inf spelled out."""
    if value is None:
        return "—"
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if 10**digits <= abs(value) < 1e6:
        return f"{value:,.0f}"
    if value != 0 and not 1e-3 <= abs(value) < 1e6:
        mantissa, exponent = f"{value:.{digits - 1}e}".split("e")
        mantissa = mantissa.rstrip("0").rstrip(".") if "." in mantissa else mantissa
        return f"{mantissa}e{int(exponent)}"
    return f"{value:.{digits}g}"


def fmt_hparam(name: str, value: float | None) -> str:
    """A hyperparameter's value: a switch as true or false (as config.toml and `rltui info`
    write it), a number as `fmt_value` does."""
    if name in SWITCHES and value is not None and value in (0.0, 1.0):
        return "true" if value else "false"
    return fmt_value(value)


def fmt_count(value: float) -> str:
    """1234 -> 1,234; 123456 -> 123.5k; 12345678 -> 12.35M."""
    value = float(value)
    if abs(value) < 10_000:
        return f"{value:,.0f}"
    if abs(value) < 1_000_000:
        return f"{value / 1e3:.1f}k"
    if abs(value) < 1_000_000_000:
        return f"{value / 1e6:.2f}M"
    return f"{value / 1e9:.2f}G"


def count_ticks(low: float, high: float, most: int) -> tuple[list[float], list[str]]:
    """Tick positions and labels for an axis of counts (env steps) from `low` to `high`:
    round positions (multiples of 1, 2 or 5 x 10^k), at most `most` of them, labelled as
    compactly as the status line counts (1.5M rather than 1500000.0)."""
    if not (math.isfinite(low) and math.isfinite(high)) or high <= low:
        return ([low], [fmt_count(low)]) if math.isfinite(low) else ([], [])
    raw = (high - low) / max(1, most - 1)  # no step this size or larger gives too many
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(
        power * factor
        for factor in (1, 2, 5, 10)
        if math.floor(high / (power * factor)) - math.ceil(low / (power * factor)) < most
    )
    ticks = [i * step for i in range(math.ceil(low / step), math.floor(high / step) + 1)]
    if not ticks:  # a range narrower than one round step: its ends
        return [low, high], [fmt_count(low), fmt_count(high)]
    top = max(abs(ticks[0]), abs(ticks[-1]))
    unit, suffix = next(((u, x) for u, x in ((1e9, "G"), (1e6, "M"), (1e3, "k")) if top >= max(u, 10_000)), (1, ""))
    # As many decimals as the step needs: 0.5M, 1.0M, 1.5M; 2M, 4M, 6M.
    decimals = max(0, -math.floor(math.log10(step / unit) + 1e-9))
    return ticks, [f"{tick / unit:,.{decimals}f}{suffix}" if tick else "0" for tick in ticks]


def fmt_duration(seconds: float | None, *, hours: bool = False) -> str:
    """Whole seconds as m:ss, or h:mm:ss from an hour on or always with `hours` (a column
    whose width should not change when the hour comes); — when unknown."""
    if seconds is None or not math.isfinite(seconds):
        return "—"
    seconds = int(max(0.0, seconds))
    whole_hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{whole_hours}:{minutes:02d}:{secs:02d}" if whole_hours or hours else f"{minutes}:{secs:02d}"


def bucket_means(values: Sequence[float], buckets: int) -> list[float]:
    """`values` averaged down to at most `buckets` points, over equal runs of consecutive
    values (one per cell: a chart or sparkline fed thousands of points re-bins them on
    every draw for nothing). The mean shows the trend; a max would show spikes."""
    values = np.asarray(values, dtype=float)
    if len(values) <= buckets:
        return values.tolist()
    starts = (np.arange(buckets) * len(values)) // buckets
    sums = np.add.reduceat(values, starts)
    counts = np.diff(np.append(starts, len(values)))
    return (sums / counts).tolist()


def fmt_bytes(value: int | None) -> str:
    return "—" if value is None else size_text(value, steady=True)


def time_ticks(low: float, high: float, most: int) -> tuple[list[float], list[str]]:
    """Tick positions and labels for an axis of wall time in seconds: round durations
    (10 s, 1 min, 15 min, 1 h...), at most `most` of them, labelled as the status line
    writes durations (m:ss, h:mm:ss)."""
    if not (math.isfinite(low) and math.isfinite(high)) or high <= low:
        return ([low], [fmt_duration(low)]) if math.isfinite(low) else ([], [])
    steps = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 3 * 3600, 6 * 3600, 12 * 3600, 86400)
    step = next((s for s in steps if math.floor(high / s) - math.ceil(low / s) < most), None)
    if step is None:
        step = 86400 * math.ceil((high - low) / (86400 * max(1, most - 1)))
    ticks = [float(i * step) for i in range(math.ceil(low / step), math.floor(high / step) + 1)]
    if not ticks:
        return [low, high], [fmt_duration(low), fmt_duration(high)]
    return ticks, [fmt_duration(t) for t in ticks]
