"""A3T (HotFlip) on A3T's CNN for SST-2: the baseline rows of the paper's Table 4 ("ARC vs A3T
(CNN)"), which the paper trained on A3T's word-level CNN (Zhang, Albarghouthi, D'Antoni, ICML
2020), not on an LSTM.

``--config experiments/configs/a3t_cnn.py:SPACE`` (or ``--config a3t_cnn.py:SPACE``): ``del2sub2`` or ``sub2ins2`` (A3T degenerates
to HotFlip training on ``del2ins2``, which has no Sub). The model is A3T's: frozen GloVe, one
convolution of 100 filters over 5-word windows, ReLU, max over the windows, a linear head, no
dropout (``config.model = "cnn"``, ``config.cnn``; A3T pools windows by a 5-wide average over a
fixed-length input, arc_jax by the max over the sentence's windows). Everything else is the LSTM
A3T row's (arc_jax/configs/a3t.py): Sub abstracted by intervals (for the CNN, the per-position
hulls of :mod:`arc_jax.nn.cnn`), the rest of the space augmented with HotFlip's top-1 string,
λ and ε on ARC's curriculum with the ARC row's λ_max, the best epoch by dev certified accuracy
under the whole space (the CNN's sound bound: shifted-position hulls for Del and Ins).
"""

from arc_jax.configs import a3t


def get_config(arg: str = "del2sub2"):
  c = a3t.get_config(arg)
  c.name = f"a3t_cnn_{arg}"
  c.model = "cnn"
  c.cnn.filters = 100
  c.cnn.kernel_width = 5
  c.dropout_rate = 0.0
  return c
