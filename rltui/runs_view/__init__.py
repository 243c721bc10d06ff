"""What the runs view (`rltui runs`, drawn by rltui.ui.screens.runs) shows, without Textual.

`rows` makes the list's rows and sorts and filters them; `curves` works out the curves of an
overlay or a grouping. They read runs through `rltui.runfiles` (`loading` reads a run
directory into compact columns, cached per run by its files' mtimes and sizes; `discovery`
finds the runs under a directory and tells each one's state); `rltui.commands.runs` is
`rltui runs` itself. Run directories are only read (a live run's control socket is
connected to and closed, nothing is sent), and an env's module is never imported:
config.toml is read as TOML.
"""
