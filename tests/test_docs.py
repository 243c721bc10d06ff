"""The README stays true: every config key documented, CI runs the README's test command."""

from pathlib import Path

from rltui.config import KEYS

ROOT = Path(__file__).resolve().parent.parent


def test_readme_documents_every_config_key():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    missing = [key for key in KEYS if f"| `{key}` |" not in readme]
    assert not missing


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci_lines = [l.strip() for l in (ROOT / ".ci" / "run").read_text().splitlines() if "pytest" in l]
    assert ci_lines and ci_lines[-1] in readme
