from rltui.cli import entry

entry()
