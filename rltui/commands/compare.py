"""`rltui compare RUN_DIR...`: runs side by side, headless. A table of each run's final
return (the mean of its last 10) and best, the env steps it took to reach `--threshold`,
its wall time and how its configuration differs from the first run's; `--group-by KEY`
aggregates runs sharing a value of KEY (seeds, say) into a mean (with a Student's t
interval) or interquartile mean (with a bootstrap interval, called a range where it spans
the runs' minimum to maximum), each saying over how many runs; `--plot` draws the curves in
the terminal.

A run's figures (`rltui.runfiles.comparison`) and the statistics (`rltui.runfiles.statistics`)
are plain Python and NumPy on lists read by `rltui.runfiles.reader.read_run`, so the runs
view shares them; this module writes them out.
"""

from __future__ import annotations

import math
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from rltui.errors import ExitCode, UsageError
from rltui.formatting import count_ticks, fmt_duration  # plain Python: no Textual
from rltui.runfiles.comparison import (
    FINAL_WINDOW,
    RunSummary,
    best_label,
    compared_column,
    group_by,
    grouped_value,
    show_value,
    summarize,
)
from rltui.runfiles.reader import RunData, open_run
from rltui.runfiles.statistics import STATISTICS, Interval, band, ema, interval, interval_kind
from trainers.metrics_spec import EPISODE_RETURN

FINAL = f"mean of last {FINAL_WINDOW}"  # what the table's final column says it is


# --- output ---------------------------------------------------------------------------------------


def _num(value: float) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.4g}"


def render_table(header: Sequence[str], rows: Sequence[Sequence[str]], numeric: set[int] = frozenset()) -> str:
    widths = [max(len(str(c)) for c in column) for column in zip(header, *rows)]

    def line(cells):
        return "  ".join(str(c).rjust(w) if i in numeric else str(c).ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return "\n".join([line(header), line(["-" * w for w in widths]), *(line(r) for r in rows)])


def summary_table(summaries: Sequence[RunSummary], metric: str, threshold: float | None) -> str:
    header = ["run", "env", "algo", "env steps", f"{FINAL} {metric}", f"{best_label(metric)} {metric}"]
    if threshold is not None:
        header.append(f"steps to {threshold:g}")
    header += ["wall time", "config vs first run"]
    rows = []
    for i, s in enumerate(summaries):
        row = [s.name, s.env, s.algo, f"{s.env_steps:,}", _num(s.final), _num(s.best)]
        if threshold is not None:
            row.append(f"{s.steps_to_threshold:,}" if s.steps_to_threshold is not None else "never")
        note = "(first)" if i == 0 else (" ".join(s.differences) or "(same)")
        if s.population:
            note = f"[population {s.population}] " + note
        if s.problems:
            note = f"[damaged: {'; '.join(s.problems)}] " + note
        row += [fmt_duration(s.wall_time), note]  # as `rltui runs` and the launch summary write it
        rows.append(row)
    numeric = {3, 4, 5, 6} | ({7} if threshold is not None else set())
    return render_table(header, rows, numeric)


def interval_text(found: Interval) -> str:
    """An interval as the group table shows it: its bounds, what kind it is and over how
    many runs ("[12.1, 24.9] 95% t, n=2"; "range" where that is all a bootstrap can say)."""
    if found.kind == "none":
        return f"- n={found.n}"
    if found.kind == "range":
        return f"[{_num(found.low)}, {_num(found.high)}] range, n={found.n}"
    return f"[{_num(found.low)}, {_num(found.high)}] 95% {found.kind}, n={found.n}"


def group_table(runs: Sequence[RunData], key: str, metric: str, statistic: str) -> str:
    groups = group_by(runs, key, lambda run: grouped_value(run, key, metric))
    header = ["group", "runs", f"{FINAL} {metric} ({statistic})", "interval",
              f"{best_label(metric)} {metric} ({statistic})"]
    rows = []
    for value, members in groups.items():
        finals = [s for s in (summarize(r, metric, None, r.config).final for r in members) if math.isfinite(s)]
        bests = [s for s in (summarize(r, metric, None, r.config).best for r in members) if math.isfinite(s)]
        final = interval(finals, statistic)
        rows.append([f"{key}={show_value(value)}", str(len(members)), _num(final.center),
                     interval_text(final), _num(STATISTICS[statistic](bests))])
    return render_table(header, rows, {1, 2, 4})


def wants_colour(stream) -> bool:
    """Whether escape codes may go to `stream`: a terminal, and NO_COLOR (no-color.org)
    not set."""
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


# Plain text has no colours to tell curves apart: each curve draws with its own character,
# which the legend shows beside its name.
PLAIN_MARKERS = "*o+x#@%="
# Plain text draws a group's band edges at every this many of its points (of `band`'s 100).
PLAIN_BAND_EVERY = 8


def plot(runs: Sequence[RunData], metric: str, smooth: float, *, width: int | None = None,
         height: int | None = None, group: str | None = None, statistic: str = "mean",
         colour: bool = False) -> str:
    """The runs' curves (or each group's band) overlaid, as terminal text (plotext); a
    population's is its best member's. The env steps axis is labelled as the dashboard's
    (0.5M, 1.0M); without `colour`, the text holds no escape codes, and each curve has its
    own marker."""
    import plotext as plt

    def marker(index: int) -> str | None:
        return None if colour else PLAIN_MARKERS[index % len(PLAIN_MARKERS)]

    plt.clear_figure()
    plt.theme("clear")
    if width or height:
        plt.plotsize(width or 100, height or 25)
    xs: list[float] = []  # each curve's first and last env steps
    if group:
        groups = group_by(runs, group, lambda run: grouped_value(run, group, metric))
        for index, (value, members) in enumerate(groups.items()):
            curves = []
            for run in members:
                steps, values, _ = compared_column(run, metric)
                curves.append((steps, ema(values, smooth) if values else values))
            b = band(curves, statistic)
            center = _plottable(b.steps, b.center)
            if len(center[0]):
                label = f"{group}={show_value(value)} ({len(members)})"
                plt.plot(*center, label=label, marker=marker(index))
                # In colour the band's edges are dotted lines in the group's colour; in
                # plain text every point of them would swamp the curves: a few marks show
                # where each edge runs.
                if colour:
                    plt.plot(*_plottable(b.steps, b.low), marker="dot")
                    plt.plot(*_plottable(b.steps, b.high), marker="dot")
                else:
                    sparse = slice(0, None, PLAIN_BAND_EVERY)
                    plt.scatter(*_plottable(b.steps[sparse], b.low[sparse]), marker=".")
                    plt.scatter(*_plottable(b.steps[sparse], b.high[sparse]), marker=".")
                xs += [center[0][0], center[0][-1]]
    else:
        for index, run in enumerate(runs):
            steps, values, member = compared_column(run, metric)
            curve = _plottable(steps, ema(values, smooth))
            if len(curve[0]):
                label = run.name if member is None else f"{run.name} (member {member})"
                plt.plot(*curve, label=label, marker=marker(index))
                xs += [curve[0][0], curve[0][-1]]
    if xs:
        columns = width or shutil.get_terminal_size().columns
        plt.xticks(*count_ticks(min(xs), max(xs), max(2, columns // 12)))
    title = f"{metric}{f' (EMA {smooth:g})' if smooth else ''}"
    if group:
        title += f": {statistic} per group, 95% {interval_kind(statistic)} band {'dotted' if colour else '(.)'}"
    plt.title(title)
    plt.xlabel("env steps")
    text = plt.build()
    return text if colour else plt.uncolorize(text)


# Beyond this size the plot's own axis arithmetic (ranges, ticks) overflows a float.
PLOT_LIMIT = 1e300


def _plottable(steps: Sequence[float], values: Sequence[float]) -> tuple[list[float], list[float]]:
    """The points of a curve a plot can draw: finite, and within PLOT_LIMIT of zero."""
    points = [(float(x), float(y)) for x, y in zip(steps, values) if math.isfinite(y) and abs(y) <= PLOT_LIMIT]
    return [x for x, _ in points], [y for _, y in points]


def cmd_compare(args) -> int:
    if not 0 <= args.smooth < 1:
        raise UsageError(f"--smooth: expected a number in [0, 1), got {args.smooth:g}")
    if args.threshold is not None and not math.isfinite(args.threshold):
        raise UsageError(f"--threshold: expected a finite number, got {args.threshold:g}")
    runs = [open_run(Path(path)) for path in args.run_dirs]
    base = runs[0].config
    summaries = [summarize(run, args.metric, args.threshold, base) for run in runs]
    if not any(run.column(args.metric)[0] for run in runs):
        raise UsageError(f"--metric: no run has values of {args.metric}")
    print(summary_table(summaries, args.metric, args.threshold))
    if args.group_by:
        print()
        print(group_table(runs, args.group_by, args.metric, args.statistic))
    if args.plot:
        print()
        print(plot(runs, args.metric, args.smooth, group=args.group_by, statistic=args.statistic,
                   colour=wants_colour(sys.stdout)))
    return ExitCode.OK


def add_parser(sub) -> None:
    compare = sub.add_parser(
        "compare", help="compare runs: returns, steps to a threshold, config differences, curves",
        description="Compare runs headless: final return (the mean of the last 10) and best, env steps to reach "
                    "--threshold, wall time and how each configuration differs from the first run's. Run "
                    "directories are only read.",
    )
    compare.add_argument("run_dirs", metavar="RUN_DIR", nargs="+", help="run directories (runs/NAME)")
    compare.add_argument("--metric", default=EPISODE_RETURN, help=f"the metric compared (default {EPISODE_RETURN})")
    compare.add_argument("--threshold", type=float, help="report the env steps each run took to reach this value")
    compare.add_argument("--group-by", metavar="KEY",
                         help="aggregate runs sharing a value of config KEY (e.g. seed, lr)")
    compare.add_argument("--statistic", choices=sorted(STATISTICS), default="mean",
                         help="what --group-by aggregates with: mean (the default) or iqm (interquartile mean)")
    compare.add_argument("--plot", action="store_true", help="draw the curves in the terminal")
    compare.add_argument("--smooth", type=float, default=0.6,
                         help="EMA weight of the plotted curves, in [0, 1); 0 draws them raw (default 0.6)")
    compare.set_defaults(run=cmd_compare)
