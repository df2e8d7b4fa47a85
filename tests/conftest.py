"""Test-wide settings."""

import gc
import os
from pathlib import Path

# Compiling dominates the suite's time on CPU. LLVM's optimisation level cuts the compile time of
# a certified LSTM's gradient by about a third (15.1 s to 9.5 s, measured under load); it can move
# float32 results in their last bits (measured: per-example margins of a kept model differ by up
# to 5e-7 from those of the default level), so a test that compares with committed numbers bit
# for bit runs them in a subprocess at the default level (tests/test_per_example_tables.py).
# Set before JAX starts its backend; subprocesses of the tests inherit it.
os.environ["XLA_FLAGS"] = " ".join(filter(None, (os.environ.get("XLA_FLAGS"),
                                                 "--xla_backend_optimization_level=0")))

# The real data: $ARC_DATA_DIR when set, else ../shared/data beside the checkout (CI's layout).
# Named here so that no test downloads: without either, the tests that need it are skipped.
os.environ.setdefault("ARC_DATA_DIR", str(Path(__file__).resolve().parents[2] / "shared" / "data"))

import jax  # noqa: E402  (after XLA_FLAGS)
import pytest
from hypothesis import settings

# A property test's first example compiles its jitted functions, and the machines running the
# suite are shared: wall-clock deadlines would fail tests for the load, not for the code.
settings.register_profile("arc_jax", deadline=None)
settings.load_profile("arc_jax")

_MAPS = Path("/proc/self/maps")
_MAX_MAPPINGS = 20_000


def _mappings() -> int:
  with _MAPS.open() as maps:
    return sum(1 for _ in maps)


@pytest.fixture(autouse=True)
def _release_compiled_programs():
  """Drops JAX's compiled programs once they hold too many memory mappings.

  Every CPU executable XLA keeps alive holds hundreds of memory mappings (about 900 for the
  gradient of a small certified LSTM), and Linux refuses new mappings past ``vm.max_map_count``
  (65,530 by default): the whole suite in one process used to reach it about 140 tests in, and
  XLA's compiler then failed with "Cannot allocate memory" or a segmentation fault. Tests that
  share programs keep sharing them until the process holds ``_MAX_MAPPINGS``; without
  ``/proc`` the programs are dropped after every test.
  """
  yield
  if not _MAPS.exists() or _mappings() > _MAX_MAPPINGS:
    jax.clear_caches()
    gc.collect()
