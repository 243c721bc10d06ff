"""Dashboard themes: TOML files shipped in the `rltui.themes` package (the top-level
`themes/` folder) plus any `*.toml` in the user's `$XDG_CONFIG_HOME/rltui/themes/`
(default `~/.config/rltui/themes/`).

A theme file holds the fields of `textual.theme.Theme`:

    name = "my-theme"          # required
    primary = "#4EA1FF"        # required; every colour is anything textual's Color.parse reads
    dark = true
    secondary = "..."          # optional: accent, foreground, background, surface, panel,
                               # boost, success, warning, error
    [variables]                # optional extra CSS variables, e.g. "footer-key-foreground"

A bad user file is skipped with a reason (the dashboard shows it); a bad bundled file is
a bug and raises.
"""

from __future__ import annotations

import importlib.resources
import os
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from textual.color import Color, ColorParseError
from textual.theme import BUILTIN_THEMES, Theme

from rltui.infra.read_limits import TEXT_FILE_BYTES, read_text

DEFAULT_THEME = "rltui-dark"
# Prefix that `--theme dark` may leave out.
_PREFIX = "rltui-"

_COLOUR_FIELDS = (
    "primary", "secondary", "accent", "foreground", "background", "surface", "panel", "boost",
    "success", "warning", "error",
)
_OTHER_FIELDS = {"name": str, "dark": bool, "luminosity_spread": float, "text_alpha": float, "variables": dict}


class ThemeFileError(ValueError):
    """A theme file that cannot be used; the message names the file and the field."""


def user_theme_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "rltui" / "themes"


def _bundled_theme_files() -> list[Any]:
    try:
        root = importlib.resources.files("rltui.themes")
    except ModuleNotFoundError:
        # Running from a source checkout: the package dir mapping (rltui.themes -> themes/)
        # only exists once installed.
        root = Path(__file__).resolve().parents[2] / "themes"
    return sorted((f for f in root.iterdir() if f.name.endswith(".toml")), key=lambda f: f.name)


def _is_colour(value: object) -> bool:
    try:
        Color.parse(value)  # type: ignore[arg-type]
    except (ColorParseError, TypeError, AttributeError):
        return False
    return isinstance(value, str)


def parse_theme(text: str, source: str) -> Theme:
    """Build a Theme from TOML text; ThemeFileError names `source` and the bad field."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ThemeFileError(f"{source}: not valid TOML: {err}") from None
    unknown = sorted(set(data) - set(_COLOUR_FIELDS) - set(_OTHER_FIELDS))
    if unknown:
        allowed = ", ".join((*_OTHER_FIELDS, *_COLOUR_FIELDS))
        raise ThemeFileError(f"{source}: unknown field {unknown[0]!r}; allowed: {allowed}")
    for field in ("name", "primary"):
        if field not in data:
            raise ThemeFileError(f"{source}: missing required field {field!r}")
    for field, kind in _OTHER_FIELDS.items():
        value = data.get(field)
        if value is None:
            continue
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            data[field] = value = float(value)
        if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
            raise ThemeFileError(f"{source}: {field} must be a {kind.__name__}, got {value!r}")
    if not data["name"].strip():
        raise ThemeFileError(f"{source}: name must not be empty")
    for field in _COLOUR_FIELDS:
        value = data.get(field)
        if value is not None and not _is_colour(value):
            raise ThemeFileError(f"{source}: {field}: not a colour: {value!r}")
    for key, value in data.get("variables", {}).items():
        if not isinstance(value, str):
            raise ThemeFileError(f"{source}: variables.{key} must be a string, got {value!r}")
    return Theme(**data)


def load_themes(user_dir: Path | None = None, problems: list[str] | None = None) -> list[Theme]:
    """Bundled themes, then the user's (a user theme with a bundled name replaces it).
    Unusable user files are skipped and described in `problems` when given."""
    themes: dict[str, Theme] = {}
    for resource in _bundled_theme_files():
        theme = parse_theme(resource.read_text(encoding="utf-8"), f"bundled theme {resource.name}")
        themes[theme.name] = theme
    directory = user_theme_dir() if user_dir is None else Path(user_dir)
    for path in sorted(directory.glob("*.toml")) if directory.is_dir() else ():
        try:
            theme = parse_theme(read_text(path, TEXT_FILE_BYTES, "a theme"), str(path))
        except (OSError, UnicodeDecodeError) as err:
            if problems is not None:
                problems.append(f"{path}: cannot read: {err}")
            continue
        except ThemeFileError as err:
            if problems is not None:
                problems.append(str(err))
            continue
        themes[theme.name] = theme
    return list(themes.values())


def available_theme_names(themes: Iterable[Theme] | None = None, user_dir: Path | None = None) -> list[str]:
    """rltui's themes (bundled and user) first, then Textual's built-in ones."""
    ours = [t.name for t in (load_themes(user_dir) if themes is None else themes)]
    return ours + sorted(name for name in BUILTIN_THEMES if name not in ours and name != "textual-ansi")


def resolve_theme_name(name: str | None, themes: Iterable[Theme] | None = None, user_dir: Path | None = None) -> str:
    """The registered name for `name` (None: the default; `dark` finds `rltui-dark`).
    Raises ValueError with one line listing the available themes."""
    if name is None:
        return DEFAULT_THEME
    names = available_theme_names(themes, user_dir)
    for candidate in (name, _PREFIX + name):
        if candidate in names:
            return candidate
    raise ValueError(f"--theme: unknown theme {name!r}; available: {', '.join(names)}")


def check_theme(name: str | None, user_dir: Path | None = None) -> str:
    """For the CLI, before anything starts: the registered theme name for `--theme NAME`
    (the default when None); ValueError with one line listing the available ones."""
    return resolve_theme_name(name, user_dir=user_dir)
