"""Dashboard themes (TOML files), shipped inside the package as rltui.themes."""
