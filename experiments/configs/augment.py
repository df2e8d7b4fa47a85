"""Data augmentation on SST-2: each batch also trains on one random member of S(x) per example.

``--config experiments/configs/augment.py:MODEL,SPACE``: MODEL ``lstm`` or ``bilstm``; SPACE
``del2sub2``, ``sub2ins2``, ``del2ins2`` or ``review`` (LSTM only); default ``lstm,del2sub2``.
Early stopping 5, at most 24 epochs (REFERENCE.md §10.2); the best epoch has the best dev
accuracy (on the clean dev set; the original measured it on dev plus augmented dev).
"""

from arc_jax.train.config import PAPER_SPACES, default_config

ROWS = [(m, s) for m in ("lstm", "bilstm") for s in PAPER_SPACES if (m, s) != ("bilstm", "review")]


def get_config(arg: str = "lstm,del2sub2"):
  model, _, space = arg.partition(",")
  if (model, space) not in ROWS:
    raise ValueError(f"No data augmentation row {arg!r}; choose one of: "
                     f"{', '.join(f'{m},{s}' for m, s in ROWS)}.")
  c = default_config()
  c.name = f"augment_{model}_{space}"
  c.method = "augment"
  c.bidirectional = model == "bilstm"
  c.space = PAPER_SPACES[space]
  c.lambda_max = 0.0
  c.early_stopping = 5
  if space == "review":
    c.max_candidates = 0  # sample from the same S_review as the ARC row certifies
  return c
