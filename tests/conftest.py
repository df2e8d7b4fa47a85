"""Test-wide settings."""

import gc

import jax
import pytest
from hypothesis import settings

# A property test's first example compiles its jitted functions, and the machines running the
# suite are shared: wall-clock deadlines would fail tests for the load, not for the code.
settings.register_profile("arc_jax", deadline=None)
settings.load_profile("arc_jax")


@pytest.fixture(autouse=True)
def _release_compiled_programs():
  """Drops JAX's compiled programs after each test.

  Every CPU executable XLA keeps alive holds thousands of memory mappings (one test of the sound
  interval DPs leaves about 7,000), and Linux refuses new mappings past ``vm.max_map_count``
  (65,530 by default). The whole suite in one process used to reach it about 140 tests in: XLA's
  compiler then failed with "Cannot allocate memory" or a segmentation fault. Tests share no
  compiled programs worth keeping, so each starts from an empty cache.
  """
  yield
  jax.clear_caches()
  gc.collect()
