"""HotFlip adversarial training on SST-2: each batch also trains on the top-1 HotFlip string
(beam 1) of every example under the row's space, found with the current parameters.

``--config experiments/configs/hotflip.py:MODEL,SPACE``: MODEL ``lstm`` or ``bilstm``; SPACE
``del2sub2``, ``sub2ins2``, ``del2ins2`` or ``review`` (LSTM only); default ``lstm,del2sub2``.
Early stopping 5, at most 24 epochs (docs/ORIGINAL.md §7); the best epoch has the best dev
accuracy (on the clean dev set; the original measured it on dev plus HotFlip dev). S_review
attacks with every PPDB candidate, the same S_review as the ARC row certifies.
"""

from arc_jax.configs import baseline_row_config


def get_config(arg: str = "lstm,del2sub2"):
  return baseline_row_config("hotflip", arg)
