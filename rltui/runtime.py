"""Process-wide JAX setup that must happen before JAX initialises: host device count and
the persistent compilation cache. Kept apart so the CLI can parse and validate input
without importing JAX at all."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "rltui" / "jax"


def configure_jax(host_devices: int, compile_cache: bool) -> None:
    """`host_devices` > 1 asks XLA for that many CPU devices (ignored if the user already
    set the flag themselves). Call before the first `import jax`."""
    flags = os.environ.get("XLA_FLAGS", "")
    if host_devices > 1 and "xla_force_host_platform_device_count" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={host_devices}".strip()
    import jax

    if compile_cache:
        path = cache_dir()
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError:
            return  # an unwritable cache directory only costs compile time
        jax.config.update("jax_compilation_cache_dir", str(path))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)


def select_devices(requested: int) -> list:
    """`requested` devices of the default backend; 0 picks automatically: every
    accelerator, or one CPU device (on CPU, splitting a small batch over host devices
    costs more in synchronisation than it gains; measured in benchmarks/throughput.py)."""
    import jax

    local = jax.local_devices()
    if requested == 0:
        return local[:1] if local[0].platform == "cpu" else local
    if requested > len(local):
        raise ValueError(f"devices: {requested} requested but only {len(local)} {local[0].platform} device(s) available")
    return local[:requested]
