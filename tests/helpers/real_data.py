"""``requires_data``: skips a test when the real data cannot be found (arc_jax.data.paths)."""

import pytest

from arc_jax.data import paths

try:
  paths.find_data_file("sst2/train.tsv.gz")
  MISSING_DATA = None
except paths.DataFileNotFoundError as missing:
  MISSING_DATA = f"real data not found: {missing}"

requires_data = pytest.mark.skipif(MISSING_DATA is not None, reason=str(MISSING_DATA))
