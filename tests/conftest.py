"""Shared by the whole suite, laid out like the code: tests/trainers, tests/config,
tests/session, tests/control, tests/ui and tests/cli. The shared helpers (helpers.py, fakes.py, control_client.py) live
here at the top; test modules that lend each other setup (test_cli's `rltui` runner, for
one) are importable from every folder."""

import os
import sys
from pathlib import Path

# Tests run on the CPU with one host device unless a test starts its own subprocess.
os.environ.setdefault("JAX_PLATFORMS", "cpu")

_TESTS = Path(__file__).resolve().parent
for _folder in ("trainers", "config", "session", "control", "ui", "cli"):
    if str(_TESTS / _folder) not in sys.path:
        sys.path.insert(0, str(_TESTS / _folder))
