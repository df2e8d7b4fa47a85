"""ARC certified training on SST-2: the LSTM and Bi-LSTM rows of the paper, and S_review.

``--config experiments/configs/arc.py:MODEL,SPACE``: MODEL ``lstm`` or ``bilstm``; SPACE
``del2sub2``, ``sub2ins2``, ``del2ins2`` or ``review`` (S_review, LSTM only). Without ``:…`` it is
``lstm,del2sub2``, the default of ``experiments/train.py``. λ_max per row from docs/ORIGINAL.md §7;
S_review uses every PPDB candidate (the original's S_review run).
"""

from arc_jax.configs import sst2_row_config

LAMBDA_MAX = {
    "lstm,del2sub2": 0.5, "lstm,sub2ins2": 0.6, "lstm,del2ins2": 0.9, "lstm,review": 0.8,
    "bilstm,del2sub2": 0.5, "bilstm,sub2ins2": 0.9, "bilstm,del2ins2": 0.7,
}


def get_config(arg: str = "lstm,del2sub2"):
  c = sst2_row_config("arc", arg)
  c.lambda_max = LAMBDA_MAX[arg]
  return c
