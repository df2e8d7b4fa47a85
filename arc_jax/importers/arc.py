"""The original ARC PyTorch checkpoints (``model-checkpoint-<epoch>.pth`` of ``src/train.py``,
models ``lstm-dp`` / ``lstm-dp-general``; docs/ORIGINAL.md §3, §9).

Their state dict: ``embs.weight`` (V+1, 300; row 0 the unknown word, zero), ``linear_input``
(300→100 with bias, then ReLU; absent with ``--no-wordvec-layer``), the LSTM as two linear
layers ``lstm.i2h`` (100→400) and ``lstm.h2h`` (100→400), each with its bias, the Bi-LSTM's
backward direction as ``lstm.back_i2h`` / ``lstm.back_h2h``, and the head ``fc_hidden`` (H or
2H → 100, ReLU) and ``fc_output`` (100 → 1, one logit for BCE). The cell's gates are laid out
[i | f | o | g], as arc_jax's, so every kernel is the transposed ``weight`` and nothing is
reordered; the single logit z becomes the logits (0, z).

The original drops words without a vector (as arc_jax does) and pools ``final`` (the last state
of each direction; the backward direction's after reading the first word) or ``mean``.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from arc_jax.importers.layout import Affine, Cell, Classifier, ImporterError, classifier, flatten
from arc_jax.importers.layout import refuse_leftovers, require

REQUIRED_LAYERS = ("lstm.i2h", "lstm.h2h", "fc_hidden", "fc_output")
OPTIONAL_LAYERS = {"linear_input": ("linear_input",),
                   "lstm.back_i2h": ("lstm.back_i2h", "lstm.back_h2h")}
"""Layer → the layers that come with it, present when its weight is."""


def _linear(params: Mapping[str, np.ndarray], name: str, used: set[str]) -> Affine:
  """The ``ibp.Linear`` ``name``: ``weight`` (out, in) as the kernel (in, out), and its bias."""
  weight = require(params, f"{name}.weight", (None, None), f"ARC checkpoint, {name}")
  bias = require(params, f"{name}.bias", (weight.shape[0],), f"ARC checkpoint, {name}")
  used |= {f"{name}.weight", f"{name}.bias"}
  return Affine(weight.T, bias)


def import_checkpoint(state_dict: Mapping, pooling: str = "final") -> Classifier:
  """The :class:`~arc_jax.importers.layout.Classifier` of an ARC ``lstm-dp`` checkpoint's state
  dict (:func:`arc_jax.importers.pytorch.read_state_dict` of the ``.pth`` file)."""
  params = flatten(dict(state_dict))
  if "lstm.weight_ih_l0" in params:
    raise ImporterError("This is a torch nn.LSTM state dict (lstm.weight_ih_l0), not an ARC "
                        "lstm-dp checkpoint: import it with --from torch.")
  used = {"embs.weight"}
  embeddings = require(params, "embs.weight", (None, None), "ARC checkpoint")
  names = [*REQUIRED_LAYERS, *(n for key, group in OPTIONAL_LAYERS.items()
                               if f"{key}.weight" in params for n in group)]
  layers = {name: _linear(params, name, used) for name in names}
  refuse_leftovers(params, used, "ARC checkpoint")
  directions = [("lstm.i2h", "lstm.h2h")] + (
      [("lstm.back_i2h", "lstm.back_h2h")] if "lstm.back_i2h" in layers else [])
  cells = [Cell(layers.pop(i2h), layers.pop(h2h)) for i2h, h2h in directions]
  head = ("fc_hidden", "fc_output")
  return classifier(embeddings, layers, cells, pooling, projection_relu=True,
                    projection="linear_input" if "linear_input" in layers else "none",
                    head=head)
