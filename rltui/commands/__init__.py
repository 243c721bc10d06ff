"""The `rltui` commands: one module per command, each owning its parser."""
