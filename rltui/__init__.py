"""rltui: a terminal dashboard for training reinforcement-learning agents in JAX."""

__version__ = "0.1.0"
