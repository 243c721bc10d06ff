"""The watch view's panes: a frame is laid out in the view's worker, and a new frame
repaints only the rows that changed, so the view costs the dashboard's UI thread little."""

from __future__ import annotations

from rich.text import Text
from textual.app import App, ComposeResult
from textual.geometry import Region

from rltui.ui.screens.watch import LinesPane, pane_lines


class PaneApp(App):
    CSS = "LinesPane { width: 20; height: 6; }"

    def compose(self) -> ComposeResult:
        yield LinesPane(id="pane")


def test_pane_lines_wrap_to_the_width_and_keep_styles():
    lines = pane_lines(Text("abcdefgh\nxy", style="cyan"), 4)
    assert [strip.text for strip in lines.strips] == ["abcd", "efgh", "xy"]
    assert lines.plain == "abcdefgh\nxy"
    assert all(seg.style is not None and seg.style.color.name == "cyan"
               for strip in lines.strips for seg in strip if seg.text.strip())


async def test_a_new_frame_repaints_only_the_rows_that_changed():
    app = PaneApp()
    async with app.run_test(size=(40, 10)) as pilot:
        pane = app.query_one("#pane", LinesPane)
        pane.show(pane_lines(Text("row 0\nrow 1\nrow 2"), 20))
        await pilot.pause()
        assert str(pane.render()) == "row 0\nrow 1\nrow 2"
        assert pane.render_line(1).text.startswith("row 1")

        marked = []
        original = pane.refresh

        def refresh(*regions, **kwargs):
            marked.append(regions)
            return original(*regions, **kwargs)

        pane.refresh = refresh
        pane.show(pane_lines(Text("row 0\nrow one\nrow 2"), 20))
        assert marked == [(Region(0, 1, 20, 1),)]
        await pilot.pause()
        assert pane.render_line(1).text.startswith("row one")
        assert [pane.render_line(y).text.rstrip() for y in (0, 2, 3)] == ["row 0", "row 2", ""]
