"""The device stats sampler: real sources where this machine has them, fakes for the
rest (NVML, JAX devices with memory stats); a missing or failing source is reported,
never raised."""

from __future__ import annotations

import subprocess
import sys
import types

import psutil
import pytest

from rltui.session.devices import DeviceSampler, DeviceStats, GpuStats, JaxDeviceStats


def test_sample_on_this_machine_never_raises():
    sampler = DeviceSampler()
    stats = sampler.sample()
    sampler.close()
    assert len(stats.cpu_percent) == psutil.cpu_count()
    assert all(0 <= p <= 100 for p in stats.cpu_percent)
    assert stats.process_rss > 0 and stats.memory_total >= stats.process_rss
    # GPUs, or none (no NVIDIA library), or the reason NVML failed.
    assert stats.gpus or stats.unavailable.get("gpu", "no GPU")


def test_jax_devices_only_once_jax_is_loaded():
    """The sampler must not import JAX itself (that would fix its device count from the
    sampler thread), nor textual: run in a fresh interpreter to see sys.modules."""
    code = (
        "import sys\n"
        "from rltui.session.devices import DeviceSampler\n"
        "s = DeviceSampler(use_nvml=False)\n"
        "print(s.sample().unavailable['jax'])\n"
        "assert 'jax' not in sys.modules and 'textual' not in sys.modules\n"
        "import jax\n"
        "(d,) = s.sample().jax_devices[:1]\n"
        "print(d.label, d.kind, d.bytes_in_use)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
        env={**__import__("os").environ, "JAX_PLATFORMS": "cpu"},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["JAX not loaded", "cpu:0 cpu None"]


class FakeDevice:
    def __init__(self, id, stats=None, fail=False):
        self.platform, self.id, self.device_kind = "gpu", id, "Fake H200"
        self._stats, self._fail = stats, fail

    def memory_stats(self):
        if self._fail:
            raise RuntimeError("not supported")
        return self._stats


def test_jax_memory_stats_where_available(monkeypatch):
    fake_jax = types.SimpleNamespace(
        devices=lambda: [FakeDevice(0, {"bytes_in_use": 5, "bytes_limit": 100, "peak_bytes_in_use": 7}),
                         FakeDevice(1, fail=True)]
    )
    monkeypatch.setitem(sys.modules, "jax", fake_jax)
    stats = DeviceSampler(use_nvml=False).sample()
    assert stats.jax_devices == (
        JaxDeviceStats("gpu", 0, "Fake H200", 5, 100, 7),
        JaxDeviceStats("gpu", 1, "Fake H200", None, None, None),
    )
    assert "jax" not in stats.unavailable


def test_jax_failure_is_reported(monkeypatch):
    def broken():
        raise RuntimeError("backend exploded")

    monkeypatch.setitem(sys.modules, "jax", types.SimpleNamespace(devices=broken))
    stats = DeviceSampler(use_nvml=False).sample()
    assert stats.jax_devices == ()
    assert stats.unavailable["jax"] == "RuntimeError: backend exploded"


def fake_nvml(fail_util=False, init_error=None, count=2):
    """A pynvml module; `init_error` names the NVMLError subclass nvmlInit raises."""
    calls = {"init": 0, "shutdown": 0}

    class NVMLError(Exception):
        pass

    errors = {
        "NVMLError_LibraryNotFound": type("NVMLError_LibraryNotFound", (NVMLError,), {}),
        "NVMLError_DriverNotLoaded": type("NVMLError_DriverNotLoaded", (NVMLError,), {}),
    }
    messages = {"NVMLError_LibraryNotFound": "NVML Shared Library Not Found",
                "NVMLError_DriverNotLoaded": "Driver Not Loaded"}

    def init():
        calls["init"] += 1
        if init_error is not None:
            raise errors[init_error](messages[init_error])

    def utilization(handle):
        if fail_util:
            raise NVMLError("not supported")
        return types.SimpleNamespace(gpu=93)

    module = types.SimpleNamespace(
        NVMLError=NVMLError,
        **errors,
        nvmlInit=init,
        nvmlShutdown=lambda: calls.__setitem__("shutdown", calls["shutdown"] + 1),
        nvmlDeviceGetCount=lambda: count,
        nvmlDeviceGetHandleByIndex=lambda i: f"handle{i}",
        nvmlDeviceGetName=lambda h: b"NVIDIA H200" if h == "handle0" else "NVIDIA H200",
        nvmlDeviceGetUtilizationRates=utilization,
        nvmlDeviceGetMemoryInfo=lambda h: types.SimpleNamespace(used=12 * 2**30, total=141 * 2**30),
    )
    return module, calls


def test_nvml_gpu_utilisation_and_memory(monkeypatch):
    module, calls = fake_nvml()
    monkeypatch.setitem(sys.modules, "pynvml", module)
    sampler = DeviceSampler()
    stats = sampler.sample()
    assert stats.gpus == (
        GpuStats(0, "NVIDIA H200", 93.0, 12 * 2**30, 141 * 2**30),
        GpuStats(1, "NVIDIA H200", 93.0, 12 * 2**30, 141 * 2**30),
    )
    assert "gpu" not in stats.unavailable
    sampler.sample()
    sampler.close()
    assert calls == {"init": 1, "shutdown": 1}


def test_nvml_partial_failure_keeps_the_other_readings(monkeypatch):
    module, _ = fake_nvml(fail_util=True)
    monkeypatch.setitem(sys.modules, "pynvml", module)
    (gpu, _) = DeviceSampler().sample().gpus
    assert gpu.utilization_percent is None and gpu.memory_total == 141 * 2**30


def _sample_three_times_with_nvml_failing(monkeypatch, init_error: str):
    """(the last sample, NVML call counts) of a sampler whose nvmlInit fails with `init_error`."""
    module, calls = fake_nvml(init_error=init_error)
    monkeypatch.setitem(sys.modules, "pynvml", module)
    sampler = DeviceSampler()
    for _ in range(3):
        stats = sampler.sample()
    return stats, calls


def test_without_the_nvidia_library_there_is_no_gpu_and_no_failure(monkeypatch):
    """A CPU-only machine: no GPU to show, and no error about a library it never had."""
    stats, calls = _sample_three_times_with_nvml_failing(monkeypatch, "NVMLError_LibraryNotFound")
    assert stats.gpus == () and "gpu" not in stats.unavailable
    assert calls["init"] == 1  # not retried on every sample


def test_without_nvidia_ml_py_there_is_no_gpu_and_no_failure(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    stats = DeviceSampler().sample()
    assert stats.gpus == () and "gpu" not in stats.unavailable


def test_no_nvidia_gpu_is_not_a_failure(monkeypatch):
    module, _ = fake_nvml(count=0)
    monkeypatch.setitem(sys.modules, "pynvml", module)
    stats = DeviceSampler().sample()
    assert stats.gpus == () and "gpu" not in stats.unavailable


def test_nvml_failing_where_the_library_is_is_reported_once(monkeypatch):
    stats, calls = _sample_three_times_with_nvml_failing(monkeypatch, "NVMLError_DriverNotLoaded")
    assert stats.gpus == () and stats.unavailable["gpu"] == "NVMLError_DriverNotLoaded: Driver Not Loaded"
    assert calls["init"] == 1


def test_another_process_has_its_own_jax_devices(monkeypatch):
    """An attached dashboard watches the run's process: its JAX devices are not missing,
    they are there (and on the status line)."""
    import os

    monkeypatch.setitem(sys.modules, "jax", types.SimpleNamespace(devices=lambda: [FakeDevice(0)]))
    stats = DeviceSampler(use_nvml=False, pid=os.getpid()).sample()
    assert stats.jax_devices == () and stats.jax_process == os.getpid()
    assert "jax" not in stats.unavailable
    assert stats.process_rss > 0


def test_missing_psutil_is_reported(monkeypatch):
    monkeypatch.setitem(sys.modules, "psutil", None)  # import psutil -> ImportError
    stats = DeviceSampler(use_nvml=False).sample()
    assert stats.cpu_percent == () and stats.process_rss is None
    assert "psutil" in stats.unavailable["cpu"] and "memory" not in stats.unavailable


def test_failing_psutil_call_is_reported(monkeypatch):
    sampler = DeviceSampler(use_nvml=False)

    def broken(**kwargs):
        raise PermissionError("no /proc")

    monkeypatch.setattr(sampler._psutil, "cpu_percent", broken)
    stats = sampler.sample()
    assert stats.unavailable["cpu"] == "PermissionError: no /proc"
    assert stats.process_rss is not None  # memory still read


@pytest.mark.parametrize("stats, expected", [
    (DeviceStats(unavailable={"cpu": "psutil missing", "gpu": "no driver", "jax": "JAX not loaded"}),
     ["JAX devices unavailable (JAX not loaded)", "CPU unavailable (psutil missing)", "GPU unavailable (no driver)"]),
    (DeviceStats(process_rss=2**20, jax_process=14554),
     ["JAX devices: the run's (not described)", "RSS 1.0 MiB", "no NVIDIA GPU"]),
    (DeviceStats(cpu_percent=(0.0, 100.0), process_rss=2**20, memory_total=2**30,
                 jax_devices=(JaxDeviceStats("gpu", 0, "H200", 2**30, 2**31),),
                 gpus=(GpuStats(0, "H200", None, None, None),)),
     ["gpu:0 H200  mem 1.0 GiB / 2.0 GiB", "CPU  50% avg, 2 cores ▁█", "RSS 1.0 MiB / 1.0 GiB",
      "GPU0 H200  util —  mem unavailable"]),
    # Sizes as every message writes them (rltui.infra.read_limits.size_text), a ".0" kept for a steady width.
    (DeviceStats(jax_devices=(JaxDeviceStats("gpu", 0, "H200", 0, 3 << 39),)),
     ["gpu:0 H200  mem 0 bytes / 1.5 TiB", "no NVIDIA GPU"]),
])
def test_device_panel_text(stats, expected):
    from rltui.ui.widgets.devices import describe_stats

    assert describe_stats(stats).plain.splitlines() == expected


def test_an_attached_runs_devices_are_the_ones_it_describes():
    from rltui.ui.widgets.devices import describe_stats

    stats = DeviceStats(process_rss=2**20, jax_process=14554)
    assert describe_stats(stats, ("cpu:0 cpu", "cpu:1 cpu")).plain.splitlines()[:2] == ["cpu:0 cpu", "cpu:1 cpu"]


def test_a_watched_run_that_has_ended_is_said_in_words():
    # An attached dashboard watches the run's process; once the run ends, that process is
    # gone: the panel says so, not a psutil exception.
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        sampler = DeviceSampler(use_jax=False, use_nvml=False, pid=child.pid)
        assert sampler.sample().process_rss is not None
    finally:
        child.kill()
        child.wait(10)
    from rltui.ui.widgets.devices import describe_stats

    stats = sampler.sample()
    assert stats.process_rss is None
    assert stats.unavailable["memory"] == "the run's process has ended"
    text = describe_stats(stats).plain
    assert "the run's process has ended" in text and "NoSuchProcess" not in text and "pid=" not in text
