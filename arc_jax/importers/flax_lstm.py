"""Flax classifiers from their parameters: an embedding (``nnx.Embed`` / ``linen.Embed``:
``embedding`` (V, E)) → [a ``Linear`` / ``Dense`` (+ ReLU)] → one LSTM cell per direction (in an
``nnx.RNN`` / ``nnx.Bidirectional`` or their Linen forms, or called directly) → final or mean
pooling → one or two ``Linear`` / ``Dense`` layers (ReLU between them).

Cells (flax 0.12):

* ``nnx.LSTMCell`` and Linen's ``LSTMCell`` and ``OptimizedLSTMCell``: one dense per gate and
  side, ``ii if ig io`` (``if_`` in NNX) with a kernel (in, H) and no bias, ``hi hf hg ho`` with
  a kernel (H, H) and a bias (H,); gates i, f, o sigmoid, g tanh (the defaults; other
  ``gate_fn`` / ``activation_fn`` cannot be seen in the parameters and are not supported).
* ``nnx.OptimizedLSTMCell``: ``dense_i.kernel`` (in, 4H), ``dense_h.kernel`` (H, 4H) and
  ``dense_h.bias`` (4H,), the gates (i, f, g, o) along the last axis.

Flax computes ``x @ kernel``, as arc_jax does, so kernels are concatenated (and reordered to
[i | f | o | g]) but not transposed; the input side has no bias (zero). A Bi-LSTM's directions
are told apart by their names (``forward_rnn`` / ``backward_rnn`` of ``Bidirectional``, or
names with ``forward`` / ``backward``), else by ``cells=(forward, backward)``. Flax's carry is
``(c, h)``; the states are the same.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from arc_jax.importers.layout import Affine, Cell, Classifier, ImporterError, classifier, flatten
from arc_jax.importers.layout import read_npz, refuse_leftovers, reorder_gates, require

FLAX_GATES = "ifgo"
GATE_DENSES = {"i": ("ii", "hi"), "f": ("if", "hf"), "g": ("ig", "hg"), "o": ("io", "ho")}
"""Gate → its input-side and recurrent dense of the per-gate cells (NNX names ``if`` ``if_``)."""


def read_params(path) -> dict[str, np.ndarray]:
  """The parameters in a file: ``.msgpack`` (``flax.serialization.msgpack_serialize`` of a pure
  dict, e.g. ``nnx.to_pure_dict(nnx.state(model, nnx.Param))`` or Linen's variables) or
  ``.npz`` (dotted or ``/``-separated paths)."""
  path = Path(path)
  if path.suffix == ".npz":
    return read_npz(path)
  if path.suffix == ".msgpack":
    from flax import serialization  # pylint: disable=import-outside-toplevel
    return flatten(serialization.msgpack_restore(path.read_bytes()))
  raise ImporterError(f"{path}: cannot read {path.suffix or 'files without a suffix'}; save the "
                      "parameters as .msgpack (flax.serialization.msgpack_serialize) or .npz.")


def _params(tree) -> dict[str, np.ndarray]:
  """Dotted path → array of the parameters only: an ``nnx.State`` filtered to ``nnx.Param``,
  Linen's ``{"params": ...}`` unwrapped; another Linen collection (``batch_stats``) refused."""
  from flax import nnx  # pylint: disable=import-outside-toplevel
  if isinstance(tree, nnx.State):
    tree = nnx.filter_state(tree, nnx.Param)
  if isinstance(tree, Mapping) and "params" in tree:
    others = sorted(set(tree) - {"params"})
    if others:
      raise ImporterError(f"The variables hold collections {others} besides 'params' (batch "
                          "statistics, caches); only parameters can be imported.")
    tree = tree["params"]
  return flatten(tree)


def _cell_prefixes(params: Mapping[str, np.ndarray]) -> list[str]:
  """The path of every LSTM cell: ``<p>.hi.kernel`` (per-gate cells) or ``<p>.dense_h.kernel``
  (``nnx.OptimizedLSTMCell``)."""
  return sorted({k.rsplit(".", 2)[0] for k in params
                 if k.endswith((".hi.kernel", ".dense_h.kernel")) or k in ("hi.kernel",
                                                                            "dense_h.kernel")})


def _directions(prefixes: list[str], cells: Sequence[str] | None) -> list[str]:
  """The cell paths in the order (forward, backward)."""
  if cells is not None:
    missing = [c for c in cells if c not in prefixes]
    if missing or len(cells) != len(prefixes):
      raise ImporterError(f"cells={list(cells)} must name every LSTM cell of the parameters "
                          f"({prefixes}), forward first.")
    return list(cells)
  if not prefixes:
    raise ImporterError("The parameters hold no LSTM cell (no 'hi.kernel' of an LSTMCell nor "
                        "'dense_h.kernel' of an OptimizedLSTMCell); GRU and other cells cannot "
                        "be imported.")
  if len(prefixes) > 2:
    raise ImporterError(f"The parameters hold {len(prefixes)} LSTM cells ({prefixes}); only one "
                        "layer (one cell, or two for a Bi-LSTM) can be imported.")
  if len(prefixes) == 1:
    return prefixes
  backward = [p for p in prefixes if any(w in p.lower() for w in ("backward", "reverse"))]
  if len(backward) != 1:
    raise ImporterError(f"Cannot tell which of the cells {prefixes} reads the sentence "
                        "backwards; name them with --cells FORWARD,BACKWARD.")
  return [p for p in prefixes if p != backward[0]] + backward


def _join(prefix: str, name: str) -> str:
  return f"{prefix}.{name}" if prefix else name


def _cell(params: Mapping[str, np.ndarray], prefix: str, used: set[str]) -> Cell:
  """The cell at ``prefix`` in arc_jax's layout."""
  what = f"LSTM cell {prefix or '(top level)'}"
  if _join(prefix, "dense_h.kernel") in params:
    keys = [_join(prefix, k) for k in ("dense_i.kernel", "dense_h.kernel", "dense_h.bias")]
    h_kernel = require(params, keys[1], (None, None), what)
    hidden = h_kernel.shape[0]
    i_kernel = require(params, keys[0], (None, 4 * hidden), what)
    h_bias = require(params, keys[2], (4 * hidden,), what)
    require(params, keys[1], (hidden, 4 * hidden), what)
    used |= set(keys)
    return Cell(Affine(reorder_gates(i_kernel, FLAX_GATES, 1), np.zeros(4 * hidden, np.float32)),
                Affine(reorder_gates(h_kernel, FLAX_GATES, 1), reorder_gates(h_bias, FLAX_GATES, 0)))
  hidden = require(params, _join(prefix, "hi.kernel"), (None, None), what).shape[0]
  inputs, recurrent, biases = [], [], []
  for gate in FLAX_GATES:
    side_i, side_h = GATE_DENSES[gate]
    if side_i == "if" and _join(prefix, "if_.kernel") in params:
      side_i = "if_"
    keys = [_join(prefix, f"{side_i}.kernel"), _join(prefix, f"{side_h}.kernel"),
            _join(prefix, f"{side_h}.bias")]
    inputs.append(require(params, keys[0], (None, hidden), what))
    recurrent.append(require(params, keys[1], (hidden, hidden), what))
    biases.append(require(params, keys[2], (hidden,), what))
    used |= set(keys)
  cat = lambda blocks, axis: reorder_gates(np.concatenate(blocks, axis), FLAX_GATES, axis)
  return Cell(Affine(cat(inputs, 1), np.zeros(4 * hidden, np.float32)),
              Affine(cat(recurrent, 1), cat(biases, 0)))


def _embedding(params: Mapping[str, np.ndarray], used: set[str]) -> np.ndarray:
  keys = sorted(k for k in params if k == "embedding" or k.endswith(".embedding"))
  if len(keys) != 1:
    raise ImporterError(f"Expected one embedding table ('<name>.embedding' of an Embed), found "
                        f"{keys or 'none'}; import a model with one Embed.")
  used.add(keys[0])
  return require(params, keys[0], (None, None), "Embed")


def _dense_layers(params: Mapping[str, np.ndarray], used: set[str]) -> dict[str, Affine]:
  """Every ``Linear`` / ``Dense`` outside ``used``: path → layer (kernel (in, out), bias)."""
  layers = {}
  for key in sorted(params):
    if key.endswith("kernel") and key not in used:
      name = key[:-len(".kernel")] if "." in key else ""
      kernel = require(params, key, (None, None), f"Linear {name}")
      bias_key = _join(name, "bias")
      bias = (require(params, bias_key, (kernel.shape[1],), f"Linear {name}")
              if bias_key in params else np.zeros(kernel.shape[1], np.float32))
      layers[name] = Affine(kernel, bias)
      used |= {key, bias_key}
  return layers


def import_params(params, pooling: str = "final", *, projection_relu: bool = True,
                  cells: Sequence[str] | None = None, projection: str | None = None,
                  head: Sequence[str] | None = None) -> Classifier:
  """The :class:`~arc_jax.importers.layout.Classifier` of a Flax classifier's parameters.

  Args:
    params: an ``nnx.State`` (e.g. ``nnx.state(model)``; non-parameters are left out), its pure
      dict, Linen's variables ``{"params": ...}`` or their params, or :func:`read_params` of a
      file.
    pooling: ``"final"`` (each direction's last carry, concatenated forward first) or
      ``"mean"`` (mean of the outputs over the sentence's positions).
    projection_relu: a ReLU follows the projection layer (False: it is linear).
    cells: the cells' paths, forward first, where their names do not tell.
    projection, head: the layers' paths, where the shapes do not decide (``projection="none"``).
  """
  flat = _params(params)
  used: set[str] = set()
  directions = _directions(_cell_prefixes(flat), cells)
  lstm = [_cell(flat, p, used) for p in directions]
  embeddings = _embedding(flat, used)
  layers = _dense_layers(flat, used)
  refuse_leftovers(flat, used, "Flax parameters")
  return classifier(embeddings, layers, lstm, pooling, projection_relu, projection, head)
