"""The device panel: JAX devices, CPU use per core, process memory, GPUs (NVML)."""

from __future__ import annotations

from textual.containers import VerticalScroll
from textual.content import Content
from textual.reactive import reactive
from textual.widgets import Static

from rltui.formatting import fmt_bytes
from rltui.session.devices import DeviceStats

_BARS = "▁▂▃▄▅▆▇█"


def core_bars(percents: tuple[float, ...]) -> str:
    """One cell per core, its height the core's use (an idle core is the lowest bar, not
    a gap): 64 cores still fit on a line."""
    return "".join(_BARS[min(7, max(0, round(p / 100 * 7)))] for p in percents)


def _memory(used: int | None, total: int | None) -> str:
    if used is None:
        return "unavailable"
    return f"{fmt_bytes(used)} / {fmt_bytes(total)}" if total else fmt_bytes(used)


def describe_stats(stats: DeviceStats | None, run_devices: tuple[str, ...] = ()) -> Content:
    """`run_devices`: the JAX devices of a run in another process (an attached or served
    dashboard), as its `describe()` names them ("cpu:0 cpu"), shown where this process
    has none of its own to sample."""
    if stats is None:
        return Content.styled("sampling…", "dim")
    lines: list[Content] = []
    missing = stats.unavailable

    def unavailable(label: str, source: str) -> Content:
        return Content.assemble(f"{label} ", (f"unavailable ({missing[source]})", "dim"))

    if stats.jax_devices:
        for device in stats.jax_devices:
            line = Content.assemble((device.label, "bold"), f" {device.kind}")
            if device.bytes_in_use is not None:
                line = Content.assemble(line, f"  mem {_memory(device.bytes_in_use, device.bytes_limit)}")
            lines.append(line)
    elif stats.jax_process is not None and run_devices:
        # An attached run's devices, as the run describes them.
        for device in run_devices:
            label, _, kind = device.partition(" ")
            lines.append(Content.assemble((label, "bold"), f" {kind}" if kind else ""))
    elif stats.jax_process is not None:
        lines.append(Content.styled("JAX devices: the run's (not described)", "dim"))
    elif "jax" in missing:
        lines.append(unavailable("JAX devices", "jax"))
    if stats.cpu_percent:
        average = stats.cpu_average or 0.0
        lines.append(
            Content.assemble(
                ("CPU ", "bold"), f"{average:3.0f}% avg, {len(stats.cpu_percent)} cores ",
                (core_bars(stats.cpu_percent), "$accent"),
            )
        )
    elif "cpu" in missing:
        lines.append(unavailable("CPU", "cpu"))
    if stats.process_rss is not None:
        lines.append(Content.assemble(("RSS ", "bold"), f"{_memory(stats.process_rss, stats.memory_total)}"))
    elif "memory" in missing:
        lines.append(unavailable("memory", "memory"))
    for gpu in stats.gpus:
        util = "—" if gpu.utilization_percent is None else f"{gpu.utilization_percent:.0f}%"
        lines.append(
            Content.assemble(
                (f"GPU{gpu.index} ", "bold"),
                f"{gpu.name}  util {util}  mem {_memory(gpu.memory_used, gpu.memory_total)}",
            )
        )
    if not stats.gpus:
        lines.append(unavailable("GPU", "gpu") if "gpu" in missing else Content.styled("no NVIDIA GPU", "dim"))
    return Content("\n").join(lines)


class DevicePanel(VerticalScroll):
    """Shows the latest sample; the app samples on a slow timer in a worker thread."""

    stats: reactive[DeviceStats | None] = reactive(None)
    # The run's JAX devices when it runs in another process ("cpu:0 cpu"): set once known.
    run_devices: reactive[tuple[str, ...]] = reactive(tuple)
    _lines = 0

    def compose(self):
        yield Static(describe_stats(None), id="device-text")

    def on_mount(self) -> None:
        self.border_title = "devices"

    def watch_run_devices(self) -> None:
        self.watch_stats(self.stats)

    def watch_stats(self, stats: DeviceStats | None) -> None:
        if not self.is_mounted:
            return
        text = describe_stats(stats, self.run_devices)
        # A layout pass re-renders every panel: only when the number of lines changes.
        lines = len(text.plain.splitlines())
        self.query_one("#device-text", Static).update(text, layout=lines != self._lines)
        self._lines = lines
