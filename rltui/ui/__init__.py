"""The Textual dashboard (`rltui launch`). The only package that imports textual,
textual_plotext or plotext (this module does not: the CLI asks it before deciding);
the CLI imports the rest lazily. Entry point: `rltui.ui.runner.run_dashboard`."""

from __future__ import annotations

import os
import sys


def can_show_dashboard() -> bool:
    """Whether the dashboard has somewhere to draw and to read keys from: a terminal on
    standard input and output, or a Textual driver of its own (textual-serve runs
    `rltui attach` over pipes with its web driver, named in TEXTUAL_DRIVER). Where neither
    holds (a pipe, a file, CI) a dashboard could never be quit."""
    if os.environ.get("TEXTUAL_DRIVER"):
        return True
    return all(stream is not None and stream.isatty() for stream in (sys.stdin, sys.stdout))
