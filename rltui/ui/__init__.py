"""The Textual dashboard (`rltui launch`). The only package that imports textual,
textual_plotext or plotext; the CLI imports it lazily. Entry point:
`rltui.ui.app.run_dashboard`."""
