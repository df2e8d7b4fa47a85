"""Data augmentation on SST-2: each batch also trains on one random member of S(x) per example.

``--config experiments/configs/augment.py:MODEL,SPACE``: MODEL ``lstm`` or ``bilstm``; SPACE
``del2sub2``, ``sub2ins2``, ``del2ins2`` or ``review`` (LSTM only); default ``lstm,del2sub2``.
Early stopping 5, at most 24 epochs (docs/ORIGINAL.md §7); the best epoch has the best dev
accuracy (on the clean dev set; the original measured it on dev plus augmented dev). S_review
samples from every PPDB candidate, the same S_review as the ARC row certifies.
"""

from arc_jax.configs import baseline_row_config


def get_config(arg: str = "lstm,del2sub2"):
  return baseline_row_config("augment", arg)
