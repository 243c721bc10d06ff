"""Device statistics for the dashboard's device panel, sampled on a slow timer.

Three optional sources: psutil (CPU use per core, process and system memory), JAX (every
device's platform, id, kind and `memory_stats()`), NVML through nvidia-ml-py (GPU
utilisation and memory). A source that is missing or fails is reported in
`DeviceStats.unavailable` with the reason; `DeviceSampler.sample()` never raises. A
machine without NVIDIA's library (or nvidia-ml-py) has no GPU to show: that is no GPUs,
not a failure. Neither is watching another process, whose JAX devices are its own.

Plain Python: no textual import. `sample()` may take milliseconds (NVML, psutil), so
the dashboard calls it from a worker thread.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Protocol


@dataclasses.dataclass(frozen=True)
class JaxDeviceStats:
    platform: str  # cpu, gpu, tpu
    id: int
    kind: str  # device_kind, e.g. "NVIDIA H200" or "cpu"
    bytes_in_use: int | None = None  # from memory_stats(); None where JAX reports none (CPU)
    bytes_limit: int | None = None
    peak_bytes_in_use: int | None = None

    @property
    def label(self) -> str:
        return f"{self.platform}:{self.id}"


@dataclasses.dataclass(frozen=True)
class GpuStats:
    index: int
    name: str
    utilization_percent: float | None
    memory_used: int | None  # bytes
    memory_total: int | None  # bytes


@dataclasses.dataclass(frozen=True)
class DeviceStats:
    cpu_percent: tuple[float, ...] = ()  # per logical core, 0-100, since the previous sample
    process_rss: int | None = None  # bytes resident for this process
    memory_total: int | None = None  # bytes of system memory
    jax_devices: tuple[JaxDeviceStats, ...] = ()
    gpus: tuple[GpuStats, ...] = ()
    unavailable: Mapping[str, str] = dataclasses.field(default_factory=dict)  # source -> reason
    # Set when sampling another process (an attached run): its JAX devices are there.
    jax_process: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "unavailable", MappingProxyType(dict(self.unavailable)))

    @property
    def cpu_average(self) -> float | None:
        return sum(self.cpu_percent) / len(self.cpu_percent) if self.cpu_percent else None


class DeviceStatsSource(Protocol):
    """What the dashboard needs from a sampler; tests inject a fixed one."""

    def sample(self) -> DeviceStats: ...

    def close(self) -> None: ...


def _reason(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class DeviceSampler:
    """Samples every available source; remembers sources that cannot work (no psutil, no
    NVIDIA driver) so a slow timer does not retry a failing library load forever."""

    def __init__(self, *, use_jax: bool = True, use_nvml: bool = True, pid: int | None = None):
        # `pid`: watch another process (an attached run) instead of this one: its memory;
        # its JAX devices cannot be seen from here (the status line lists them).
        self._pid = pid
        self._use_jax = use_jax
        self._use_nvml = use_nvml
        self._lock = threading.Lock()  # sample() and close() may come from different threads
        self._process: Any = None
        self._psutil: Any = None
        self._psutil_error: str | None = None
        self._nvml: Any = None
        self._nvml_handles: list[Any] | None = None
        self._nvml_error: str | None = None if use_nvml else "disabled"
        self._init_psutil()

    # --- sources ------------------------------------------------------------------------
    def _init_psutil(self) -> None:
        try:
            import psutil

            self._psutil = psutil
            self._process = psutil.Process(self._pid)
            # The first per-core reading compares against nothing and returns zeros: prime
            # it so the first real sample covers the interval since construction.
            psutil.cpu_percent(percpu=True)
        except Exception as exc:  # noqa: BLE001 - a missing source is reported, not raised
            self._psutil_error = _reason(exc)

    def _sample_psutil(self, unavailable: dict[str, str]) -> dict[str, Any]:
        if self._psutil is None:
            unavailable["cpu"] = self._psutil_error or "psutil not available"
            return {}
        out: dict[str, Any] = {}
        try:
            out["cpu_percent"] = tuple(float(p) for p in self._psutil.cpu_percent(percpu=True))
        except Exception as exc:  # noqa: BLE001
            unavailable["cpu"] = _reason(exc)
        try:
            out["process_rss"] = int(self._process.memory_info().rss)
            out["memory_total"] = int(self._psutil.virtual_memory().total)
        except Exception as exc:  # noqa: BLE001
            unavailable["memory"] = self._process_problem(exc)
        return out

    def _process_problem(self, exc: BaseException) -> str:
        """Why the watched process's memory cannot be read, in words: the usual causes
        (the run has ended, another user's process) are not failures of rltui."""
        whose = "this process" if self._pid is None else "the run's process"
        if isinstance(exc, getattr(self._psutil, "NoSuchProcess", ())):
            return f"{whose} has ended"
        if isinstance(exc, getattr(self._psutil, "AccessDenied", ())):
            return f"not permitted to read {whose}"
        return _reason(exc)

    def _sample_jax(self, unavailable: dict[str, str]) -> tuple[JaxDeviceStats, ...]:
        if self._pid is not None:
            return ()  # the watched process's own (DeviceStats.jax_process)
        if not self._use_jax:
            unavailable["jax"] = "disabled"
            return ()
        # Importing JAX here would initialise it (and freeze its device count) from the
        # sampler thread; only a process that already uses JAX has devices worth showing.
        jax = sys.modules.get("jax")
        if jax is None:
            unavailable["jax"] = "JAX not loaded"
            return ()
        try:
            devices = jax.devices()
        except Exception as exc:  # noqa: BLE001
            unavailable["jax"] = _reason(exc)
            return ()
        out = []
        for device in devices:
            stats: Mapping[str, Any] | None
            try:
                stats = device.memory_stats()
            except Exception:  # noqa: BLE001 - some backends raise instead of returning None
                stats = None
            stats = stats or {}
            out.append(
                JaxDeviceStats(
                    platform=str(getattr(device, "platform", "?")),
                    id=int(getattr(device, "id", 0)),
                    kind=str(getattr(device, "device_kind", "?")),
                    bytes_in_use=stats.get("bytes_in_use"),
                    bytes_limit=stats.get("bytes_limit"),
                    peak_bytes_in_use=stats.get("peak_bytes_in_use"),
                )
            )
        return tuple(out)

    def _init_nvml(self) -> None:
        try:
            import pynvml
        except ImportError:  # nvidia-ml-py is installed on Linux only: no NVIDIA GPU to show
            self._nvml_handles = []
            return
        try:
            pynvml.nvmlInit()
            count = pynvml.nvmlDeviceGetCount()
            self._nvml_handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
            self._nvml = pynvml
        except Exception as exc:  # noqa: BLE001 - reported, not raised
            if isinstance(exc, getattr(pynvml, "NVMLError_LibraryNotFound", ())):
                self._nvml_handles = []  # no NVIDIA driver library: a machine without NVIDIA GPUs
            else:
                self._nvml_error = _reason(exc)  # the library is there and failed: worth showing

    def _sample_nvml(self, unavailable: dict[str, str]) -> tuple[GpuStats, ...]:
        if self._nvml_handles is None and self._nvml_error is None:
            self._init_nvml()
        if self._nvml_error is not None:
            unavailable["gpu"] = self._nvml_error
            return ()
        if self._nvml is None:
            return ()  # no NVIDIA library: no GPUs, nothing failed
        nvml = self._nvml
        out = []
        for index, handle in enumerate(self._nvml_handles or ()):
            name, util, used, total = f"GPU {index}", None, None, None
            try:
                raw = nvml.nvmlDeviceGetName(handle)
                name = raw.decode() if isinstance(raw, bytes) else str(raw)
            except Exception:  # noqa: BLE001 - keep the other readings
                pass
            try:
                util = float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
            except Exception:  # noqa: BLE001
                pass
            try:
                memory = nvml.nvmlDeviceGetMemoryInfo(handle)
                used, total = int(memory.used), int(memory.total)
            except Exception:  # noqa: BLE001
                pass
            out.append(GpuStats(index, name, util, used, total))
        return tuple(out)

    # --- public -------------------------------------------------------------------------
    def sample(self) -> DeviceStats:
        with self._lock:
            unavailable: dict[str, str] = {}
            host = self._sample_psutil(unavailable)
            jax_devices = self._sample_jax(unavailable)
            gpus = self._sample_nvml(unavailable) if self._use_nvml else ()
            if not self._use_nvml:
                unavailable["gpu"] = "disabled"
            return DeviceStats(
                jax_devices=jax_devices, gpus=gpus, unavailable=unavailable, jax_process=self._pid, **host
            )

    def close(self) -> None:
        with self._lock:
            if self._nvml is not None:
                try:
                    self._nvml.nvmlShutdown()
                except Exception:  # noqa: BLE001 - shutting down a library that is going away
                    pass
                self._nvml = None
                self._nvml_error = "closed"


class FixedDeviceStats:
    """A source that always returns the same stats: deterministic screens in tests and
    snapshots (no live CPU numbers)."""

    def __init__(self, stats: DeviceStats):
        self.stats = stats
        self.samples = 0

    def sample(self) -> DeviceStats:
        self.samples += 1
        return self.stats

    def close(self) -> None:
        pass
