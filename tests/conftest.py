import os

# Tests run on the CPU with one host device unless a test starts its own subprocess.
os.environ.setdefault("JAX_PLATFORMS", "cpu")
