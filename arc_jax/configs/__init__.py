"""The experiment configs (``get_config(arg)`` per file), shipped with the package so that an
installed ``arc-train --config NAME.py[:ARG]`` finds them; experiments/configs/ re-exports them
for ``--config experiments/configs/NAME.py`` in a checkout. See experiments/README.md.

Here, the rows of the paper's SST-2 LSTM tables that several config files share: their spaces,
the (model, space) pairs and the config of one row. They live with the configs, not in the
library (:mod:`arc_jax.train.config` is the schema), and ship with them because the shipped
configs build their rows from them; ``experiments/configs/paper_rows.py`` re-exports them.
"""

import ml_collections

from arc_jax.train.config import SPACE_NAMES, ConfigError, default_config

PAPER_SPACES = SPACE_NAMES
"""The SST-2 spaces of the paper's LSTM tables (S_review last), by row key: the named spaces of
run names (:data:`arc_jax.train.config.SPACE_NAMES`)."""

SST2_ROWS = tuple((model, space) for model in ("lstm", "bilstm") for space in PAPER_SPACES
                  if (model, space) != ("bilstm", "review"))
"""(model, space key) of every row of the paper's SST-2 LSTM tables; S_review is LSTM only."""


def sst2_row_config(method: str, row: str) -> ml_collections.ConfigDict:
  """:func:`~arc_jax.train.config.default_config` for ``method`` on one row of the paper's SST-2
  LSTM tables.

  Sets the method, the run name ``<method>_<model>_<space>``, the architecture and the space;
  S_review rows use every PPDB candidate (``max_candidates=0``), as the original's S_review ARC
  run. Method-specific fields (λ_max, early stopping) are the caller's.

  Args:
    method: a key of ``arc_jax.train.METHODS``.
    row: ``"MODEL,SPACE"``: MODEL ``lstm`` or ``bilstm``, SPACE a key of ``PAPER_SPACES``
      (``review`` with ``lstm`` only).
  """
  model, _, space = row.partition(",")
  if (model, space) not in SST2_ROWS:
    raise ConfigError(f"No {method} row {row!r}; choose one of: "
                      f"{', '.join(f'{m},{s}' for m, s in SST2_ROWS)}.")
  c = default_config()
  c.name = f"{method}_{model}_{space}"
  c.method = method
  c.lstm.bidirectional = model == "bilstm"
  c.space = PAPER_SPACES[space]
  if space == "review":
    c.max_candidates = 0
  return c


def baseline_row_config(method: str, row: str) -> ml_collections.ConfigDict:
  """:func:`sst2_row_config` for an uncertified baseline (data augmentation, HotFlip): λ_max 0,
  and early stopping after 5 epochs without dev improvement (the original's
  ``--early-stopping 5``)."""
  c = sst2_row_config(method, row)
  c.lambda_max = 0.0
  c.early_stopping = 5
  return c
