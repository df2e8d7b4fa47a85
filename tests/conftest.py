"""Test-wide settings."""

from hypothesis import settings

# A property test's first example compiles its jitted functions, and the machines running the
# suite are shared: wall-clock deadlines would fail tests for the load, not for the code.
settings.register_profile("arc_jax", deadline=None)
settings.load_profile("arc_jax")
