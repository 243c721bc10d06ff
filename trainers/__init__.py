"""Pure-JAX reinforcement-learning trainers: no threads, files or printing."""
