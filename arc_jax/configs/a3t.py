"""A3T (HotFlip) as a baseline for the LSTM on SST-2 (Zhang, Albarghouthi, D'Antoni, ICML 2020;
the paper's Table "ARC vs A3T"): Sub abstracted by intervals, the rest of the space augmented
with HotFlip's top-1 string.

``--config experiments/configs/a3t.py:SPACE``: ``del2sub2`` or ``sub2ins2`` (A3T degenerates to
HotFlip training on ``del2ins2``, which has no Sub). λ and ε on ARC's curriculum with the ARC
row's λ_max; the best epoch by dev certified accuracy under the whole space (ARC's DP), so the
baseline is selected as ARC's rows are.
"""

from arc_jax.configs import sst2_row_config
from arc_jax.train.config import ConfigError

LAMBDA_MAX = {"del2sub2": 0.5, "sub2ins2": 0.6}


def get_config(arg: str = "del2sub2"):
  if arg not in LAMBDA_MAX:
    raise ConfigError(f"No a3t row {arg!r}; choose one of: {', '.join(LAMBDA_MAX)}.")
  c = sst2_row_config("a3t", f"lstm,{arg}")
  c.augmented.abstracted = "Sub"
  c.augmented.augment_search = "hotflip"
  c.augmented.augment_members = 1
  c.lambda_max = LAMBDA_MAX[arg]
  return c
