"""The tree is lint-clean: ruff, configured in pyproject.toml, runs as part of the suite,
so the README's test command (and CI) enforces it; and no module of the package outgrows
one job."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_ruff_finds_nothing():
    if shutil.which("ruff") is None and subprocess.run([sys.executable, "-m", "ruff", "--version"],
                                                      capture_output=True).returncode != 0:
        pytest.fail('ruff is not installed; it is part of the test extra: pip install ".[test]"')
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", str(ROOT)],
                            capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


MAX_MODULE_LINES = 400  # past this a module is doing more than one job


def test_every_module_does_one_job_in_at_most_400_lines():
    long = {str(path.relative_to(ROOT)): n for package in ("rltui", "trainers")
            for path in sorted((ROOT / package).rglob("*.py"))
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert long == {}
