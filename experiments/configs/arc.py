"""ARC certified training on SST-2: the LSTM and Bi-LSTM rows of the paper, and S_review.

``--config experiments/configs/arc.py:MODEL,SPACE``: MODEL ``lstm`` or ``bilstm``; SPACE
``del2sub2``, ``sub2ins2``, ``del2ins2`` or ``review`` (S_review, LSTM only). Without ``:…`` it is
``lstm,del2sub2``, the default of ``experiments/train.py``. λ_max per row from REFERENCE.md §10.
"""

from arc_jax.train.config import PAPER_SPACES, default_config

LAMBDA_MAX = {
    ("lstm", "del2sub2"): 0.5, ("lstm", "sub2ins2"): 0.6, ("lstm", "del2ins2"): 0.9,
    ("lstm", "review"): 0.8,
    ("bilstm", "del2sub2"): 0.5, ("bilstm", "sub2ins2"): 0.9, ("bilstm", "del2ins2"): 0.7,
}


def get_config(arg: str = "lstm,del2sub2"):
  model, _, space = arg.partition(",")
  if (model, space) not in LAMBDA_MAX:
    rows = ", ".join(f"{m},{s}" for m, s in LAMBDA_MAX)
    raise ValueError(f"No ARC row {arg!r}; choose one of: {rows}.")
  c = default_config()
  c.name = f"arc_{model}_{space}"
  c.bidirectional = model == "bilstm"
  c.space = PAPER_SPACES[space]
  c.lambda_max = LAMBDA_MAX[(model, space)]
  if space == "review":
    c.max_candidates = 0  # the original's S_review run uses every PPDB candidate (§10.5)
  return c
