"""A run's configuration: the key table, TOML, presets, sweeps, and the built `RunConfig`."""
