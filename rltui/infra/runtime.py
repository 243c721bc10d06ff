"""Process-wide JAX setup that must happen before JAX initialises: host device count, the
persistent compilation cache, XLA's CPU vector width and the size of its CPU worker pool;
the threefry hash's CPU lowering (`rltui.infra.unrolled_threefry`) and the deferral of
gymnax's plotting imports (`rltui.infra.deferred_imports`). Kept apart so the
CLI can parse and validate input without importing JAX at all."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from rltui.infra import deferred_imports, unrolled_threefry
from trainers.algorithms import algorithm
from trainers.envs import OBS_SIZES

# Below this many multiply-adds per minibatch step (forward pass, policy and value nets
# together) one XLA worker thread beats several: the ops are too small to split, and with
# two workers XLA hands each program back and forth between them. Above it the work splits
# well and XLA's default pool is faster. The threshold sits between CartPole at 16 and at
# 24 envs (128 steps, 4 minibatches); the measurements are in docs/benchmarks.md.
SMALL_STEP_MACS = 5_000_000

# XLA's CPU code generator prefers 256-bit vectors, which suits CPUs that lower their clock
# for 512-bit work. AMD's AVX-512 CPUs (Zen 4 and later) run 512-bit vectors at full clock,
# and there every training program measured runs faster with them (docs/benchmarks.md). Other
# CPUs keep XLA's default; a user's own setting of the flag in XLA_FLAGS always wins.
VECTOR_WIDTH_FLAG = "xla_cpu_prefer_vector_width"


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "rltui" / "jax"


def configure_jax(host_devices: int, compile_cache: bool) -> None:
    """`host_devices` > 1 asks XLA for that many CPU devices, and 512-bit vectors where the
    CPU runs them at full speed (each ignored if the user already set the flag themselves);
    `jax.random`'s hash is lowered as straight-line code on the CPU. Call before the first
    `import jax`."""
    deferred_imports.install()
    _quiet_callback_logs()
    flags = os.environ.get("XLA_FLAGS", "")
    added = []
    if host_devices > 1 and "xla_force_host_platform_device_count" not in flags:
        added.append(f"--xla_force_host_platform_device_count={host_devices}")
    if VECTOR_WIDTH_FLAG not in flags and full_speed_wide_vectors(_cpuinfo()):
        added.append(f"--{VECTOR_WIDTH_FLAG}=512")
    if added:
        os.environ["XLA_FLAGS"] = " ".join([flags, *added]).strip()
    import jax

    unrolled_threefry.install()
    if compile_cache:
        path = cache_dir()
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError:
            return  # an unwritable cache directory only costs compile time
        jax.config.update("jax_compilation_cache_dir", str(path))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)


def _drop_callback_failure(record: logging.LogRecord) -> bool:
    return not str(record.msg).endswith("callback failed")


def _quiet_callback_logs() -> None:
    """JAX logs the whole traceback of an exception raised in a callback (an env's
    `jax.debug.callback`) before handing it back; rltui reports it in one line naming the
    file and line (`env_source.callback_failure`), and a run's events.jsonl keeps the
    traceback."""
    for name in ("jax._src.debugging", "jax._src.callback"):
        logger = logging.getLogger(name)
        if _drop_callback_failure not in logger.filters:
            logger.addFilter(_drop_callback_failure)


def full_speed_wide_vectors(cpuinfo: str) -> bool:
    """Whether the CPU `cpuinfo` (the text of Linux's /proc/cpuinfo) describes runs 512-bit
    vectors at full clock: an AMD CPU with AVX-512."""
    fields = {}
    for line in cpuinfo.splitlines():
        name, _, value = line.partition(":")
        fields.setdefault(name.strip(), value.strip())  # the first CPU's
    return fields.get("vendor_id") == "AuthenticAMD" and "avx512f" in fields.get("flags", "").split()


def _cpuinfo() -> str:
    """The first CPU's block of /proc/cpuinfo (one block per CPU, all alike), or "" off Linux."""
    lines = []
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as file:
            for line in file:
                if not line.strip() and lines:
                    break
                lines.append(line)
    except OSError:  # XLA's defaults
        return ""
    return "".join(lines)


def resolve_cpu_threads(config, multi_process: bool = False) -> int:
    """The XLA CPU worker threads to start `config` (a RunConfig) with, for `start_backend`:
    its `cpu_threads` when set; automatic (0) resolves to 1 for a single device running an
    MLP on small minibatches (see SMALL_STEP_MACS), else 0 (XLA's default: every CPU). A
    multi-process run keeps the default: its processes may sit on machines unlike this one."""
    if config.cpu_threads:
        return config.cpu_threads
    if multi_process or config.devices > 1 or config.network != "mlp":
        return 0
    samples = config.num_envs * config.num_steps * config.static_config().num_agents  # every seed and member
    samples //= algorithm(config.algo).minibatches(config)  # the rows of one gradient step
    widths = (OBS_SIZES[config.env], *config.hidden_sizes)
    macs_per_sample = 2 * sum(a * b for a, b in zip(widths, widths[1:]))  # policy and value towers
    return 1 if samples * macs_per_sample < SMALL_STEP_MACS else 0


def start_backend(cpu_threads: int) -> int:
    """Start JAX's backends with `cpu_threads` XLA CPU worker threads (0: XLA's default, one
    per CPU) and return the number of CPUs XLA saw. Call after `configure_jax` (and
    `jax.distributed.initialize`) and before any other JAX use.

    XLA sizes its worker pool from the CPUs the process may run on when the backend starts,
    and has no option for it. So the starting thread is narrowed to `cpu_threads` CPUs for
    the start, and afterwards every thread of the process gets the full set back: the
    workers still run on any CPU, there are just fewer of them."""
    import jax

    allowed = _affinity()
    narrowed = bool(cpu_threads) and allowed is not None and cpu_threads < len(allowed)
    if narrowed:
        try:
            os.sched_setaffinity(0, sorted(allowed)[:cpu_threads])
        except OSError:  # not allowed here: XLA's default pool rather than no run
            narrowed = False
    try:
        jax.devices()
    finally:
        if narrowed:
            for tid in os.listdir("/proc/self/task"):
                try:
                    os.sched_setaffinity(int(tid), allowed)
                except OSError:  # the thread has just exited
                    pass
    return cpu_threads if narrowed else len(allowed) if allowed else os.cpu_count() or 1


def _affinity() -> set[int] | None:
    """The CPUs this process may run on, or None where the OS does not say (not Linux)."""
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def select_devices(requested: int) -> list:
    """`requested` devices of the default backend; 0 picks automatically: every
    accelerator, or one CPU device (on CPU, splitting a small batch over host devices
    costs more in synchronisation than it gains; measured in benchmarks/throughput.py)."""
    import jax

    local = jax.local_devices()
    if requested == 0:
        return local[:1] if local[0].platform == "cpu" else local
    if requested > len(local):
        raise ValueError(
            f"devices: {requested} requested but only {len(local)} {local[0].platform} device(s) available"
        )
    return local[:requested]
