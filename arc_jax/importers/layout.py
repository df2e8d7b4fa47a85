"""What every importer produces: an outside LSTM classifier in one framework-neutral layout, and
the rules that turn it into the parameters of :class:`arc_jax.nn.LSTMClassifier`.

A source model is embeddings (V, E) → optional projection (a linear map, with or without a
ReLU) → one LSTM layer, forward and optionally backward → final or mean pooling → a head of one
linear layer, or two with a ReLU between them → K = 1 (one logit, as a BCE model) or 2 logits.

arc_jax's model always has a ReLU projection and a two-layer head. A missing projection, a
projection without ReLU and a one-layer head are all mapped exactly with ``x = relu(x) −
relu(−x)``: the layer ``[A | −A]`` (with bias ``[b | −b]``) followed by ReLU and then a layer
with the kernel ``[W; −W]`` computes ``W(Ax + b)``, and does so in interval arithmetic too
(the widths of ``relu(x)`` and ``relu(−x)`` add up to the width of ``x``), so certificates are
as tight as the source model's own interval bounds. One logit z becomes the two logits (0, z):
the prediction is 1 iff z > 0, and the margin of class 1 over class 0 is z.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Mapping, Sequence

import jax
import numpy as np

ARC_GATES = "ifog"
"""arc_jax's gate layout along the 4H axis (:class:`arc_jax.nn.cells.LSTMCell`); PyTorch and
Flax use ``"ifgo"``."""

POOLINGS = ("final", "mean")
"""The poolings an imported model may use (the ones that need no extra parameters)."""


class ImporterError(ValueError):
  """A source model or file that cannot be imported; the message names the problem and the fix."""


@dataclasses.dataclass(frozen=True)
class Affine:
  """``y = x @ kernel + bias``: kernel (in, out), bias (out,)."""

  kernel: np.ndarray
  bias: np.ndarray

  @property
  def shape(self) -> tuple[int, int]:
    return self.kernel.shape


@dataclasses.dataclass(frozen=True)
class Cell:
  """One LSTM direction in arc_jax's layout: ``i2h`` (in, 4H) and ``h2h`` (H, 4H), gates
  [i | f | o | g] along the last axis (:func:`reorder_gates`)."""

  i2h: Affine
  h2h: Affine

  @property
  def hidden(self) -> int:
    return self.h2h.kernel.shape[0]


@dataclasses.dataclass(frozen=True)
class Classifier:
  """A source classifier in the framework-neutral layout.

  Attributes:
    embeddings: (V, E) the source's word vectors, row r of the source's vocabulary.
    projection: the linear map before the LSTM (E, P), or None (the LSTM reads the vectors).
    projection_relu: whether a ReLU follows ``projection``.
    cells: the forward cell, then the backward one of a Bi-LSTM.
    head: one layer (features → K) or two with a ReLU between (features → D → K).
    pooling: ``"final"`` (last state of each direction) or ``"mean"`` (mean over positions).
  """

  embeddings: np.ndarray
  projection: Affine | None
  projection_relu: bool
  cells: tuple[Cell, ...]
  head: tuple[Affine, ...]
  pooling: str


# --------------------------------------------------------------------------- reading sources


def flatten(tree) -> dict[str, np.ndarray]:
  """Dotted path → host array of every leaf of a nested mapping (a state dict, an
  ``nnx.State``, a Linen variable dict); ``/`` in keys (flattened ``.npz`` files) counts as
  a dot, and the ``.value`` of NNX variables is left out."""
  flat, _ = jax.tree_util.tree_flatten_with_path(tree)
  return {path_key(path): np.asarray(leaf) for path, leaf in flat}


def path_key(path) -> str:
  """The dotted name of a pytree path (:func:`flatten`)."""
  parts = [str(getattr(p, "key", getattr(p, "name", getattr(p, "idx", p)))) for p in path]
  if len(parts) > 1 and parts[-1] == "value":
    parts = parts[:-1]
  return ".".join(parts).replace("/", ".")


def read_npz(path) -> dict[str, np.ndarray]:
  """The arrays of an ``.npz`` file (``np.savez(path, **flat)``), keyed by dotted path."""
  with np.load(path, allow_pickle=False) as archive:
    return flatten({k: archive[k] for k in archive.files})


def reorder_gates(w: np.ndarray, order: str, axis: int) -> np.ndarray:
  """``w`` with its 4H ``axis`` (4 gate blocks in ``order``, e.g. ``"ifgo"``) put into arc_jax's
  :data:`ARC_GATES` order."""
  blocks = dict(zip(order, np.split(np.asarray(w), 4, axis=axis)))
  return np.concatenate([blocks[g] for g in ARC_GATES], axis=axis)


def require(params: Mapping[str, np.ndarray], key: str, shape: Sequence[int | None],
            what: str) -> np.ndarray:
  """``params[key]``, refused unless it exists with ``shape`` (None: any size on that axis)."""
  if key not in params:
    raise ImporterError(f"{what}: the parameter {key!r} is missing (have {_sample(params)}); "
                        "pass the model's full parameters.")
  value = params[key]
  if value.ndim != len(shape) or any(s is not None and s != v for s, v in zip(shape, value.shape)):
    wanted = "×".join("?" if s is None else str(s) for s in shape)
    raise ImporterError(f"{what}: {key!r} has shape {list(value.shape)}, expected {wanted}; "
                        "the parameters do not belong to this layout.")
  return value


def _sample(params: Mapping[str, np.ndarray], count: int = 6) -> str:
  keys = sorted(params)
  return ", ".join(keys[:count]) + (f", … ({len(keys)} in all)" if len(keys) > count else "")


def refuse_leftovers(params: Mapping[str, np.ndarray], used: set[str], source: str) -> None:
  """Refuses parameters no layer of the supported layout reads (another layer kind, a second
  LSTM layer, a normalisation): importing without them would change the model."""
  left = sorted(set(params) - used)
  if left:
    raise ImporterError(f"{source}: parameters {left[:6]} belong to no supported layer "
                        "(embedding, projection, one LSTM layer, a one- or two-layer head); "
                        "such models cannot be imported, remove those layers or retrain "
                        "without them.")


# --------------------------------------------------------------------------- arranging layers


def arrange(layers: Mapping[str, Affine], embedding_dim: int, cell_input: int, features: int,
            projection: str | None = None, head: Sequence[str] | None = None
            ) -> tuple[str | None, tuple[str, ...]]:
  """Which linear layers are the projection and the head, by their shapes.

  ``layers``: name → layer, in no particular order (state dicts and Flax states do not promise
  the forward order). The projection maps E → the LSTM input (or is absent when they are equal),
  the head maps the pooled features (H or 2H) through one or two layers to K. ``projection`` /
  ``head`` name them explicitly (``projection="none"``: no projection); otherwise the shapes
  must leave exactly one arrangement.
  """
  names = sorted(layers)
  options = []
  for proj in ([None] + names if projection is None else
               [None if projection == "none" else projection]):
    rest = [n for n in names if n != proj]
    orders = itertools.permutations(rest) if head is None else [tuple(head)]
    options += [(proj, order) for order in orders
                if _fits(layers, proj, order, embedding_dim, cell_input, features)]
  if len(options) == 1:
    return options[0]
  shapes = ", ".join(f"{n} {layers[n].shape[0]}→{layers[n].shape[1]}" for n in names)
  if not options:
    raise ImporterError(
        f"The linear layers ({shapes or 'none'}) do not fit embeddings of {embedding_dim} → "
        f"[projection →] LSTM input {cell_input}, features {features} → a head of one or two "
        "layers → 1 or 2 logits (a projection only when the LSTM input differs from the "
        "embedding size, or named with --projection); check the layers, or name them with "
        "--projection NAME|none and --head NAME[,NAME].")
  listed = "; ".join(f"projection {p or 'none'}, head {','.join(h)}" for p, h in options)
  raise ImporterError(f"The linear layers ({shapes}) fit more than one model ({listed}); name "
                      "them with --projection NAME|none and --head NAME[,NAME].")


def _fits(layers, proj, order, embedding_dim, cell_input, features) -> bool:
  """Whether projection ``proj`` and head ``order`` chain from the embeddings to 1 or 2 logits."""
  if not 1 <= len(order) <= 2 or any(n not in layers for n in (*order, proj) if n is not None):
    return False
  dims = [embedding_dim, cell_input] if proj is None else [embedding_dim, *layers[proj].shape]
  if dims[0] != dims[1] or dims[-1] != cell_input:
    return False
  shapes = [layers[n].shape for n in order]
  chained = all(a[1] == b[0] for a, b in zip(shapes, shapes[1:]))
  return shapes[0][0] == features and chained and shapes[-1][1] in (1, 2)


def classifier(embeddings: np.ndarray, layers: Mapping[str, Affine], cells: Sequence[Cell],
               pooling: str, projection_relu: bool = True, projection: str | None = None,
               head: Sequence[str] | None = None) -> Classifier:
  """The :class:`Classifier` of a source's embeddings, linear layers (arranged by
  :func:`arrange`) and cells, refused unless the directions agree and the pooling is known."""
  if pooling not in POOLINGS:
    raise ImporterError(f"pooling {pooling!r} cannot be imported; choose one of {POOLINGS}.")
  if len({(c.i2h.shape[0], c.hidden) for c in cells}) != 1:
    raise ImporterError("The forward and backward LSTM cells differ in size; a Bi-LSTM "
                        "needs equal directions.")
  cell_input, hidden = cells[0].i2h.shape[0], cells[0].hidden
  proj, order = arrange(layers, embeddings.shape[1], cell_input, hidden * len(cells),
                        projection, head)
  return Classifier(np.asarray(embeddings, np.float32),
                    None if proj is None else layers[proj], projection_relu, tuple(cells),
                    tuple(layers[n] for n in order), pooling)


# --------------------------------------------------------------------------- arc_jax parameters


def _through_relu(layer: Affine) -> Affine:
  """``[A | −A]``, ``[b | −b]``: after a ReLU it holds ``relu(y)`` and ``relu(−y)`` of
  ``y = xA + b`` (in, 2·out), which :func:`_reading_split` turns back into ``y``."""
  return Affine(np.concatenate([layer.kernel, -layer.kernel], axis=1),
                np.concatenate([layer.bias, -layer.bias]))


def _reading_split(kernel: np.ndarray) -> np.ndarray:
  """``[W; −W]`` (2·in, out): reads ``(relu(y), relu(−y))`` as ``y @ W``."""
  return np.concatenate([kernel, -kernel], axis=0)


def _identity(size: int) -> Affine:
  return Affine(np.eye(size, dtype=np.float32), np.zeros(size, np.float32))


def _two_logits(layer: Affine) -> Affine:
  """A last layer of 1 logit z as the 2 logits (0, z); a 2-logit layer unchanged."""
  if layer.shape[1] == 2:
    return layer
  return Affine(np.concatenate([np.zeros_like(layer.kernel), layer.kernel], axis=1),
                np.concatenate([np.zeros_like(layer.bias), layer.bias]))


def model_fields(source: Classifier) -> dict[str, object]:
  """The config fields of the arc_jax model that computes ``source`` (:func:`arc_parameters`),
  the sequence family's in its block ``lstm``."""
  projection = (2 * source.embeddings.shape[1] if source.projection is None else
                source.projection.shape[1] * (1 if source.projection_relu else 2))
  features = source.cells[0].hidden * len(source.cells)
  return {"hidden": source.cells[0].hidden, "dropout_rate": 0.0, "lstm": {
      "projection": projection,
      "head_hidden": source.head[0].shape[1] if len(source.head) == 2 else 2 * features,
      "bidirectional": len(source.cells) == 2, "pooling": source.pooling}}


def arc_parameters(source: Classifier) -> dict[str, np.ndarray]:
  """The parameters of :class:`arc_jax.nn.LSTMClassifier` (keyed by their path in its
  ``nnx.State``, float32) that compute ``source``'s logits exactly (see the module docstring)."""
  direct = source.projection is not None and source.projection_relu
  if direct:
    projection = source.projection
  else:
    linear = source.projection or _identity(source.embeddings.shape[1])
    projection = _through_relu(linear)
  out = {"projection.linear": projection}
  for name, cell in zip(("forward_cell", "backward_cell"), source.cells):
    i2h = cell.i2h if direct else Affine(_reading_split(cell.i2h.kernel), cell.i2h.bias)
    out |= {f"{name}.i2h": i2h, f"{name}.h2h": cell.h2h}
  last = _two_logits(source.head[-1])
  if len(source.head) == 2:
    out |= {"head_hidden": source.head[0], "head_out": last}
  else:
    out |= {"head_hidden": _through_relu(_identity(source.head[0].shape[0])),
            "head_out": Affine(_reading_split(last.kernel), last.bias)}
  return {f"{layer}.{part}": np.asarray(getattr(affine, part), np.float32)
          for layer, affine in out.items() for part in ("kernel", "bias")}
