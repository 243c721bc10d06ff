"""Plumbing below everything else: owner-only files, bounded reads, JAX's process setup,
deferred imports."""
