"""What `pip install .` ships: every package of the source tree, with its data files. An
editable install finds modules anywhere in the tree, so only a real install (CI's) would
otherwise notice a package left out of pyproject.toml."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SETUPTOOLS = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]


def _source_dir(package: str) -> Path:
    mapped = SETUPTOOLS.get("package-dir", {})
    return ROOT / mapped[package] if package in mapped else ROOT / package.replace(".", "/")


def test_every_package_of_the_tree_is_installed():
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for top in ("rltui", "trainers")
        for init in (ROOT / top).rglob("__init__.py")
    }
    assert found - set(SETUPTOOLS["packages"]) == set()


def test_every_data_file_of_a_package_is_installed():
    data = SETUPTOOLS.get("package-data", {})
    for package in SETUPTOOLS["packages"]:
        source = _source_dir(package)
        assert source.is_dir(), package
        for path in source.iterdir():
            if path.is_file() and path.suffix not in (".py", ".pyc"):
                patterns = data.get(package, [])
                assert any(path.match(pattern) for pattern in patterns), f"{package}: {path.name} is not shipped"
