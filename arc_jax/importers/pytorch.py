"""PyTorch classifiers from their ``state_dict``: ``nn.Embedding`` → [``nn.Linear`` (+ ReLU)] →
``nn.LSTM`` (one layer, uni- or bidirectional; ``batch_first`` does not change the weights) →
final or mean pooling → one or two ``nn.Linear`` (ReLU between them).

``nn.LSTM`` keeps ``weight_ih_l0`` (4H, in), ``weight_hh_l0`` (4H, H), ``bias_ih_l0`` and
``bias_hh_l0`` (4H,) with the gates in the order (i, f, g, o) and computes
``W_ih x + b_ih + W_hh h + b_hh``; the backward direction has the same names with ``_reverse``.
arc_jax's cell computes ``x @ kernel + bias`` with both biases kept apart and the gates
[i | f | o | g], so each kernel is the transposed weight with its last two gate blocks swapped.
``nn.Linear`` keeps ``weight`` (out, in), transposed likewise. Which linear layer is the
projection and which the head follows from the shapes (:func:`arc_jax.importers.layout.arrange`).

torch is optional: :func:`import_state_dict` takes plain arrays (a state dict of CPU tensors, or
the arrays of an ``.npz``); only :func:`read_state_dict` of a ``.pt`` file needs torch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from arc_jax.importers.layout import Affine, Cell, Classifier, ImporterError, classifier, flatten
from arc_jax.importers.layout import read_npz, refuse_leftovers, reorder_gates, require

TORCH_GATES = "ifgo"
WRAPPER_KEYS = ("state_dict", "model_state_dict", "model", "net")
"""Keys under which training scripts commonly save the state dict inside a checkpoint dict."""


def read_state_dict(path) -> dict[str, np.ndarray]:
  """The state dict of a ``.pt`` / ``.pth`` file (``torch.save(model.state_dict(), path)``, or a
  checkpoint dict holding it under one of :data:`WRAPPER_KEYS`) or of an ``.npz`` of its arrays,
  as dotted name → array. Loads with ``weights_only=True``: no code from the file runs."""
  path = Path(path)
  if path.suffix == ".npz":
    return read_npz(path)
  try:
    import torch  # pylint: disable=import-outside-toplevel
  except ImportError:
    raise ImporterError(f"Reading {path} needs PyTorch, which is not installed: pip install "
                        "torch (a CPU build is enough), or save the state dict as .npz "
                        "(np.savez(f, **{k: v.numpy() for k, v in state_dict.items()})).") from None
  loaded = torch.load(path, map_location="cpu", weights_only=True)
  for key in WRAPPER_KEYS:
    if isinstance(loaded, Mapping) and isinstance(loaded.get(key), Mapping):
      loaded = loaded[key]
  if not isinstance(loaded, Mapping) or not all(isinstance(v, torch.Tensor)
                                                for v in loaded.values()):
    raise ImporterError(f"{path} holds no state dict (a mapping of names to tensors); save one "
                        "with torch.save(model.state_dict(), path).")
  return {k: v.detach().float().numpy() for k, v in loaded.items()}


def _lstm_prefix(params: Mapping[str, np.ndarray]) -> str:
  """The module name of the one ``nn.LSTM`` (keys ``<prefix>.weight_ih_l0``); other recurrent
  layers and stacked LSTMs are refused."""
  prefixes = sorted(k[:-len(".weight_ih_l0")] for k in params if k.endswith(".weight_ih_l0"))
  if not prefixes:
    raise ImporterError("The state dict has no nn.LSTM (no '<name>.weight_ih_l0'); import a "
                        "model with one nn.LSTM layer.")
  if len(prefixes) > 1:
    raise ImporterError(f"The state dict has {len(prefixes)} recurrent modules ({prefixes}); "
                        "only models with one nn.LSTM can be imported.")
  prefix = prefixes[0]
  if any(k.startswith(f"{prefix}.weight_ih_l1") for k in params):
    raise ImporterError(f"{prefix} is a stacked LSTM (num_layers > 1); only one layer can be "
                        "imported: train with num_layers=1.")
  if f"{prefix}.weight_hr_l0" in params:
    raise ImporterError(f"{prefix} projects its states (proj_size > 0), which arc_jax's cell "
                        "has not; train with proj_size=0.")
  rows, cols = params[f"{prefix}.weight_hh_l0"].shape
  if rows != 4 * cols:
    kind = {3: "a GRU", 1: "a plain RNN"}.get(rows // max(cols, 1), "not an LSTM")
    raise ImporterError(f"{prefix} is {kind} ({rows // max(cols, 1)} gate blocks in "
                        "weight_hh_l0, an LSTM has 4); only LSTM cells can be imported.")
  return prefix


def _cell(params: Mapping[str, np.ndarray], prefix: str, suffix: str, used: set[str]) -> Cell:
  """One direction of the ``nn.LSTM`` at ``prefix`` (``suffix`` ``"_l0"`` or
  ``"_l0_reverse"``), in arc_jax's layout; missing biases (``bias=False``) are zero."""
  what = f"nn.LSTM {prefix}"
  w_hh = require(params, f"{prefix}.weight_hh{suffix}", (None, None), what)
  hidden = w_hh.shape[1]
  w_ih = require(params, f"{prefix}.weight_ih{suffix}", (4 * hidden, None), what)
  require(params, f"{prefix}.weight_hh{suffix}", (4 * hidden, hidden), what)
  used |= {f"{prefix}.weight_ih{suffix}", f"{prefix}.weight_hh{suffix}"}

  def affine(weight, kind):
    key = f"{prefix}.bias_{kind}{suffix}"
    bias = (require(params, key, (4 * hidden,), what) if key in params
            else np.zeros(4 * hidden, np.float32))
    used.add(key)
    return Affine(reorder_gates(weight.T, TORCH_GATES, axis=1),
                  reorder_gates(bias, TORCH_GATES, axis=0))

  return Cell(affine(w_ih, "ih"), affine(w_hh, "hh"))


def _linear_layers(params: Mapping[str, np.ndarray], used: set[str]) -> dict[str, Affine]:
  """Every ``nn.Linear`` outside ``used``: name → layer (``weight`` (out, in) transposed)."""
  layers = {}
  for key in sorted(params):
    name = key[:-len(".weight")]
    if key.endswith(".weight") and key not in used and f"{name}.bias" in params:
      weight = require(params, key, (None, None), f"nn.Linear {name}")
      bias = require(params, f"{name}.bias", (weight.shape[0],), f"nn.Linear {name}")
      layers[name] = Affine(weight.T, bias)
      used |= {key, f"{name}.bias"}
  return layers


def _embedding(params: Mapping[str, np.ndarray], used: set[str], name: str | None) -> np.ndarray:
  """The ``nn.Embedding`` weight (V, E): ``<name>.weight``, or the one 2-D weight without a
  bias that no other layer reads."""
  candidates = sorted(k for k in params if k.endswith(".weight") and k not in used
                      and params[k].ndim == 2 and k[:-len(".weight")] + ".bias" not in params)
  if name is not None:
    candidates = [f"{name}.weight"]
  if len(candidates) != 1:
    raise ImporterError(f"Cannot tell the nn.Embedding among {candidates or 'no weights'}: "
                        "name it with --embedding NAME (nn.Linear layers need a bias).")
  used.add(candidates[0])
  return require(params, candidates[0], (None, None), "nn.Embedding")


def import_state_dict(state_dict: Mapping, pooling: str = "final", *,
                      projection_relu: bool = True, embedding: str | None = None,
                      projection: str | None = None, head: Sequence[str] | None = None
                      ) -> Classifier:
  """The :class:`~arc_jax.importers.layout.Classifier` of a PyTorch classifier's state dict
  (name → tensor or array).

  Args:
    state_dict: ``model.state_dict()`` or :func:`read_state_dict` of its file.
    pooling: how the model pools the LSTM's outputs: ``"final"`` (``h_n`` of each direction,
      as ``torch.cat([h_n[0], h_n[1]], -1)``) or ``"mean"`` (mean of ``output`` over the
      positions of the sentence).
    projection_relu: a ReLU follows the projection layer (False: it is linear).
    embedding, projection, head: module names, where the shapes do not decide
      (``projection="none"``: no projection).
  """
  params = flatten(dict(state_dict))
  used: set[str] = set()
  prefix = _lstm_prefix(params)
  suffixes = ["_l0"] + (["_l0_reverse"] if f"{prefix}.weight_ih_l0_reverse" in params else [])
  cells = [_cell(params, prefix, s, used) for s in suffixes]
  embeddings = _embedding(params, used, embedding)
  layers = _linear_layers(params, used)
  refuse_leftovers(params, used, "PyTorch state dict")
  return classifier(embeddings, layers, cells, pooling, projection_relu, projection, head)
