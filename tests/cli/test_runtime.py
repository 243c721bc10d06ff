"""Process-wide JAX setup: XLA's CPU vector width and the size of its CPU worker pool."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from rltui.config.build import RunConfig
from rltui.infra import runtime
from rltui.infra.runtime import full_speed_wide_vectors, resolve_cpu_threads


@pytest.mark.parametrize(
    "changes,threads",
    [
        ({}, 1),  # the defaults: CartPole, 4 envs x 128 steps, 4 minibatches
        ({"num_envs": 8}, 1),
        ({"num_envs": 16}, 1),
        ({"num_envs": 24}, 0),
        ({"num_envs": 64}, 0),
        ({"algo": "reinforce", "num_envs": 8, "num_steps": 512}, 0),  # its defaults: one step on 4096 samples
        ({"num_seeds": 4}, 1),
        ({"num_seeds": 8}, 0),  # the seeds' minibatches add up
        ({"env": "Breakout-MinAtar", "num_envs": 64, "num_minibatches": 8}, 0),  # its preset: 400 inputs
        ({"hidden_sizes": (512, 512)}, 0),
        ({"network": "cnn", "env": "Breakout-MinAtar"}, 0),
        ({"devices": 2}, 0),
        ({"cpu_threads": 3, "num_envs": 64}, 3),  # set by the user: taken as it is
    ],
)
def test_one_worker_thread_only_for_a_single_device_and_small_minibatch_steps(changes, threads):
    assert resolve_cpu_threads(RunConfig(**changes)) == threads


PROBE = textwrap.dedent("""
    import json, os, sys
    from rltui.infra import runtime
    runtime.configure_jax(host_devices=0, compile_cache=False)
    before = sorted(os.sched_getaffinity(0))
    runtime.start_backend(int(sys.argv[1]))
    import jax, jax.numpy as jnp
    total = float(jax.jit(lambda x: (x @ x).sum())(jnp.ones((256, 256))))
    tasks = os.listdir("/proc/self/task")
    names = [open(f"/proc/self/task/{t}/comm").read().strip() for t in tasks]
    print(json.dumps({"before": before, "total": total, "workers": names.count("tf_XLAEigen"),
                      "masks": [sorted(os.sched_getaffinity(int(t))) for t in tasks]}))
""")


def probe(threads: int) -> dict:
    result = subprocess.run([sys.executable, "-c", PROBE, str(threads)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs Linux and at least 2 CPUs")
def test_start_backend_sizes_xla_worker_pool_and_gives_every_thread_all_cpus_back():
    one, default = probe(1), probe(0)
    assert one["workers"] == 1
    assert default["workers"] == len(default["before"])
    # the one worker still runs on any CPU, as does every other thread
    assert all(mask == one["before"] for mask in one["masks"])
    assert one["total"] == default["total"] == 256.0 ** 3


def test_a_multi_process_run_keeps_xla_default_unless_set():
    assert resolve_cpu_threads(RunConfig(), multi_process=True) == 0
    assert resolve_cpu_threads(RunConfig(cpu_threads=1), multi_process=True) == 1


def cpuinfo(vendor: str, flags: str) -> str:
    block = f"processor\t: 0\nvendor_id\t: {vendor}\nflags\t\t: fpu sse2 {flags}\n"
    return block + "\n" + block.replace("processor\t: 0", "processor\t: 1")


@pytest.mark.parametrize(
    "vendor,flags,wide",
    [
        ("AuthenticAMD", "avx2 avx512f avx512bw", True),  # Zen 4 and later
        ("AuthenticAMD", "avx2 fma", False),  # Zen 3: no AVX-512
        ("GenuineIntel", "avx2 avx512f avx512bw", False),  # may lower its clock for 512-bit work
        ("AuthenticAMD", "avx2 avx512fx", False),  # a whole flag, not a prefix
    ],
)
def test_512_bit_vectors_only_on_amd_cpus_with_avx512(vendor, flags, wide):
    assert full_speed_wide_vectors(cpuinfo(vendor, flags)) is wide
    assert full_speed_wide_vectors("") is False  # not Linux


def test_configure_jax_asks_for_512_bit_vectors_and_keeps_the_users_own_flags(monkeypatch):
    monkeypatch.setattr(runtime, "_cpuinfo", lambda: cpuinfo("AuthenticAMD", "avx512f"))
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_enable_fast_math=false")
    runtime.configure_jax(host_devices=2, compile_cache=False)
    assert os.environ["XLA_FLAGS"].split() == [
        "--xla_cpu_enable_fast_math=false", "--xla_force_host_platform_device_count=2",
        "--xla_cpu_prefer_vector_width=512",
    ]
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_prefer_vector_width=256")  # the user's choice wins
    runtime.configure_jax(host_devices=0, compile_cache=False)
    assert os.environ["XLA_FLAGS"] == "--xla_cpu_prefer_vector_width=256"
    monkeypatch.setattr(runtime, "_cpuinfo", lambda: cpuinfo("GenuineIntel", "avx512f"))
    monkeypatch.delenv("XLA_FLAGS")
    runtime.configure_jax(host_devices=0, compile_cache=False)
    assert "XLA_FLAGS" not in os.environ
