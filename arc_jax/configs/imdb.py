"""ARC certified training of a Bi-LSTM on IMDB (paper Table compare_jia, docs/ORIGINAL.md §7).

``--config experiments/configs/imdb.py:SPACE`` with SPACE ``sub1`` (default) or ``sub2``:
``[(Sub,1)]`` / ``[(Sub,2)]`` with the counter-fitted neighbours, mean pooling, 30 epochs of
which 20 ramp λ to 0.8 and ε to 1.
"""

from arc_jax.train.config import default_config

SPACES = {"sub1": "[(Sub,1)]", "sub2": "[(Sub,2)]"}


def get_config(space: str = "sub1"):
  if space not in SPACES:
    raise ValueError(f"No IMDB row {space!r}; choose one of {sorted(SPACES)}.")
  c = default_config()
  c.name = f"arc_imdb_bilstm_{space}"
  c.dataset = "imdb"
  c.synonyms = "counterfitted"
  c.max_candidates = 0
  c.space = SPACES[space]
  c.lstm.bidirectional = True
  c.lstm.pooling = "mean"
  c.num_epochs = 30
  c.ramp_epochs = 20
  c.lambda_max = 0.8
  return c
