"""ARC certified training of an LSTM / Bi-LSTM with attention pooling on SST-2 (paper appendix
"Handling Attention"; certified by arc_jax/certify/attention_dp.py).

``--config experiments/configs/attention.py:MODEL,SPACE``: MODEL ``lstm`` or ``bilstm``, SPACE
``del2sub2`` (default), ``sub2ins2`` or ``del2ins2``. Everything but the pooling is the ARC row of
``arc.py`` (same λ_max, curriculum and data); the run is named ``arc_attention_<model>_<space>``.
The paper reports no attention numbers, so there is no target to compare with.
"""

import importlib.util
from pathlib import Path

from arc_jax.configs import sst2_row_config
from arc_jax.train.config import ConfigError

SPACES = ("del2sub2", "sub2ins2", "del2ins2")


def _arc_lambda_max() -> dict:
  spec = importlib.util.spec_from_file_location("arc_config", Path(__file__).with_name("arc.py"))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.LAMBDA_MAX


def get_config(arg: str = "lstm,del2sub2"):
  if arg.partition(",")[2] not in SPACES:
    raise ConfigError(f"No attention row {arg!r}; choose MODEL,SPACE with MODEL lstm or bilstm "
                      f"and SPACE one of {', '.join(SPACES)}.")
  c = sst2_row_config("arc", arg)
  c.lambda_max = _arc_lambda_max()[arg]
  c.lstm.pooling = "attention"
  c.name = c.name.replace("arc_", "arc_attention_", 1)
  return c
