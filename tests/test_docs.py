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


def test_readme_results_table_matches_the_presets_records():
    # `rltui envs` reads presets.toml; the README's table must say the same.
    from rltui import presets

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    rows = {cells[1].strip(): cells for cells in (line.split("|") for line in readme.splitlines())
            if len(cells) > 8 and cells[1].strip() in presets.presets("ppo")}
    for env in presets.presets("ppo"):
        result = presets.result("ppo", env)
        if result is not None:
            steps, wall, mean, worst = (cells.strip() for cells in rows[env][3:7])
            assert (steps, wall, float(mean), float(worst)) == (
                f"{result.steps / 1e6:.1f}M", f"{result.wall_seconds:g} s", result.mean, result.min), env
