"""Tree-LSTM on the SST trees: 5 classes, a label on every node (docs/ORIGINAL.md §4, §5, §7).

``--config experiments/configs/tree.py:METHOD,SPACE``: METHOD ``arc`` (certified training),
``augment`` (data augmentation) or ``hotflip`` (HotFlip adversarial training: each batch also
trains on the top-1 tree of a beam-1 HotFlip search, node labels carried over) with SPACE
``del2sub2``, ``sub2ins2`` or ``del2ins2``; or ``normal`` alone (one model, evaluated on every space; its ``space`` only sets the dev certified
accuracy logged each epoch). Default ``arc,del2sub2``.

As the original's tree script: hidden 150, dropout 0.5, batch 20, Adagrad lr 0.05 with coupled
weight decay 1e-4, gradient clip 0.25; PPDB synonyms with one candidate per word
(``--use-fewer-sub``). ARC: 30 epochs, λ and ε ramped over 20 (T1 = 20, T2 = 10), λ_max 0.07
(``del2sub2``, ``del2ins2``) or 0.06 (``sub2ins2``); Normal: at most 50 epochs, early stopping
10; data augmentation and HotFlip: at most 30 epochs, early stopping 5. The word vectors are trained as in the
original (``trainable_embeddings``: lr 0.1 × 0.05, no weight decay). Measured against
frozen vectors (results/README.md): ARC ``del2sub2`` test Acc 48.6 / CF 26.6 trained against
47.1 / 23.1 frozen, Normal 47.8 / 4.5 against 46.5 / 4.3; ``--config.tree_lstm.trainable_embeddings=False``
gives the frozen variant.
"""

from arc_jax.configs import PAPER_SPACES
from arc_jax.train.config import default_config

LAMBDA_MAX = {"del2sub2": 0.07, "sub2ins2": 0.06, "del2ins2": 0.07}
ROWS = ("normal",) + tuple(f"{method},{space}" for method in ("arc", "augment", "hotflip")
                           for space in LAMBDA_MAX)


def get_config(arg: str = "arc,del2sub2"):
  if arg not in ROWS:
    raise ValueError(f"No Tree-LSTM row {arg!r}; choose one of: {', '.join(ROWS)}.")
  method, _, space = arg.partition(",")
  c = default_config()
  c.name = "_".join(filter(None, (method, "tree", space)))
  c.method = method
  c.model = "tree_lstm"
  c.dataset = "sst_trees"
  c.space = PAPER_SPACES[space or "del2sub2"]
  c.hidden = 150
  c.tree_lstm.trainable_embeddings = True
  c.dropout_rate = 0.5
  c.optimizer = "adagrad"
  c.batch_size = 20
  c.learning_rate = 0.05
  c.weight_decay = 1e-4
  c.grad_clip = 0.25
  if method == "arc":
    c.num_epochs = 30
    c.ramp_epochs = 20
    c.lambda_max = LAMBDA_MAX[space]
  else:
    c.lambda_max = 0.0
    c.num_epochs, c.early_stopping = (50, 10) if method == "normal" else (30, 5)
  return c
