"""Normal (clean) training on SST-2, one model per architecture for every space's table row.

``--config experiments/configs/normal.py:MODEL`` with MODEL ``lstm`` (default) or ``bilstm``.
Early stopping after 5 epochs without dev improvement, at most 24 epochs (docs/ORIGINAL.md §7).
``space`` only sets the dev certified accuracy logged each epoch; evaluate the model under any
space with experiments/evaluate.py.
"""

from arc_jax.train.config import default_config

MODELS = ("lstm", "bilstm")


def get_config(model: str = "lstm"):
  if model not in MODELS:
    raise ValueError(f"No Normal row {model!r}; choose one of {MODELS}.")
  c = default_config()
  c.name = f"normal_{model}"
  c.method = "normal"
  c.lstm.bidirectional = model == "bilstm"
  c.lambda_max = 0.0
  c.early_stopping = 5
  return c
