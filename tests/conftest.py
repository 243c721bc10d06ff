"""Shared by the whole suite, laid out like the code: tests/trainers, tests/config,
tests/session, tests/control, tests/ui and tests/cli. The shared helpers (helpers.py, fakes.py, control_client.py) live
here at the top; test modules that lend each other setup (test_cli's `rltui` runner, for
one) are importable from every folder."""

import os
import shutil
import sys
import tempfile
from pathlib import Path

# Tests run on the CPU with one host device unless a test starts its own subprocess.
os.environ.setdefault("JAX_PLATFORMS", "cpu")
# The suite checks what programs compute, not how fast they run, and compiling is most of
# its time: XLA's lowest backend optimisation level compiles about twice as fast. The graph
# passes are unchanged; LLVM's code generation does less, which rounds differently, as
# another CPU may, so the tests' tolerances and learning bounds hold under both.
# XLA's older elementwise emitters compile these small programs in about half the time of
# its fusion emitters, and one LLVM module per program saves the threads that split it.
# Subprocesses inherit them; a user's own flags are left out, as CI has none.
os.environ["XLA_FLAGS"] = " ".join([
    "--xla_backend_optimization_level=0",
    "--xla_cpu_use_fusion_emitters=false",
    "--xla_cpu_parallel_codegen_split_count=1",
])

_TESTS = Path(__file__).resolve().parent
for _folder in ("trainers", "config", "session", "control", "ui", "cli"):
    if str(_TESTS / _folder) not in sys.path:
        sys.path.insert(0, str(_TESTS / _folder))

# One JAX compilation cache for the whole session: rltui keeps it under $XDG_CACHE_HOME, so
# every `rltui` subprocess (which inherits this environment) shares the programs the others
# compiled, and none writes to the user's own cache (in-process compiles: see below). The
# first process makes the folder; xdist's workers, started from it, inherit the variable.
_SESSION_CACHE = "RLTUI_TESTS_CACHE_HOME"
_made_session_cache = _SESSION_CACHE not in os.environ
if _made_session_cache:
    os.environ[_SESSION_CACHE] = tempfile.mkdtemp(prefix="rltui-tests-cache-")
os.environ["XDG_CACHE_HOME"] = os.environ[_SESSION_CACHE]
# Processes write and read the cache at the same time: a size limit makes JAX lock it, so no
# process reads an entry another is still writing.
_CACHE_MAX_BYTES = 8 << 30
os.environ.setdefault("JAX_COMPILATION_CACHE_MAX_SIZE", str(_CACHE_MAX_BYTES))


def pytest_configure(config):
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        return  # xdist's controller: it runs no test
    # Programs compiled in a test's own process stay out of the persistent cache, also where
    # an in-process launch configures one: a worker that has run many tests has crashed
    # (SIGABRT, SIGSEGV) inside XLA serializing an executable for the cache, with no cause
    # found. Subprocesses, each a fresh rltui, share the session's cache as above.
    import jax

    jax.config.update("jax_enable_compilation_cache", False)


def pytest_unconfigure(config):
    if _made_session_cache:
        shutil.rmtree(os.environ[_SESSION_CACHE], ignore_errors=True)
