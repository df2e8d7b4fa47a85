"""Binary N-ary Tree-LSTM and the SST Tree-LSTM classifier (docs/ORIGINAL.md §4, Tai et al. 2015).

embedding (V, 300) → Linear 300→h → ReLU (leaves) → Tree-LSTM(h) → Dropout → Linear(h, 5), with
logits on every node (training uses every node's label, metrics the root's). The original trains
its embeddings (lr 0.1×, no weight decay): ``trainable_embeddings=True`` makes them an
``nnx.Param`` (the tree configs do, and the optimiser gives them that learning rate); the class
default keeps them a ``FrozenEmbedding``, as for the LSTMs. Hidden size 150 as the original's
script (the paper says 100). Weight matrices use Xavier-uniform init as the original's training
script; biases PyTorch's default (the Tree-LSTM's ``b_iou`` starts at zero).

A batch of trees (:class:`~arc_jax.perturbation.trees.TreeBatch`) runs as one jitted computation:
all leaves at once, then one ``lax.scan`` over the batch's schedule, each step computing up to W
internal nodes (of any trees) from a node-state buffer (:func:`bottom_up`).
"""

from __future__ import annotations

import functools
from typing import Callable

import chex
import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from arc_jax import interval as iv
from arc_jax.domain import Domain
from arc_jax.nn.cells import Dense, Projection
from arc_jax.nn.distinct import per_distinct_id
from arc_jax.nn.models import FrozenEmbedding, check_param_dtype
from arc_jax.perturbation.trees import TreeBatch

Value = iv.Value
State = tuple[Value, Value]


def _xavier(rngs: nnx.Rngs, shape: tuple[int, int], dtype) -> jax.Array:
  return nnx.initializers.xavier_uniform()(rngs.params(), shape, dtype)


class TreeLSTMCell(nnx.Module):
  """The binary N-ary Tree-LSTM cell of the original (gate layout ``[i | o | u]``).

  Leaf with input x: ``[i, o, u] = W_iou x + b_iou``, c = σ(i)⊙tanh(u), h = σ(o)⊙tanh(c).
  Internal node with children (h_l, c_l), (h_r, c_r): ``[i, o, u] = U_iou [h_l; h_r] + b_iou``,
  ``[f_l, f_r] = σ(U_f [h_l; h_r] + b_f)``, c = σ(i)⊙tanh(u) + f_l⊙c_l + f_r⊙c_r,
  h = σ(o)⊙tanh(c).

  Every step takes arrays or abstract values of a :class:`~arc_jax.domain.Domain` (``domain``,
  default the sound interval domain) and is sound because it composes the domain's sound rules:
  affine maps, monotone activations, products with a sigmoid gate (``mul_nonneg``) and sums. The
  internal step is
  split into :meth:`child_pre_activations` (one child's share of the gate pre-activations) and
  :meth:`merge`, because an affine map of a concatenation is the sum of the maps of its blocks —
  for boxes too: the centre/radius form is blockwise, ``[c_l; c_r] U = c_l U_l + c_r U_r`` and
  ``[r_l; r_r] |U| = r_l |U_l| + r_r |U_r|``, so the sum of the two blocks' boxes *is* the box of
  the concatenation, not a looser one. The certification DP computes each child state's share
  once and combines every pair of budget splits by an addition.
  """

  def __init__(self, in_features: int, hidden: int, *, rngs: nnx.Rngs, param_dtype=jnp.float32):
    self.hidden = hidden
    self.w_iou = nnx.Param(_xavier(rngs, (in_features, 3 * hidden), param_dtype))
    self.u_iou = nnx.Param(_xavier(rngs, (2 * hidden, 3 * hidden), param_dtype))
    self.b_iou = nnx.Param(jnp.zeros((3 * hidden,), param_dtype))
    self.u_f = Dense(2 * hidden, 2 * hidden, rngs=rngs, param_dtype=param_dtype)
    self.u_f.kernel[...] = _xavier(rngs, (2 * hidden, 2 * hidden), param_dtype)

  def leaf(self, x: Value, domain: Domain = iv.SOUND) -> State:
    """(h, c) of a leaf with input x (..., in_features); each (..., hidden)."""
    d = domain
    iou = d.linear(x, self.w_iou[...], self.b_iou[...])
    i, o, u = _blocks(iou, self.hidden, 3)
    c = d.mul_nonneg(d.monotone(jax.nn.sigmoid, i), d.monotone(jnp.tanh, u))
    return d.mul_nonneg(d.monotone(jax.nn.sigmoid, o), d.monotone(jnp.tanh, c)), c

  def child_pre_activations(self, h: Value, side: int, domain: Domain = iv.SOUND) -> Value:
    """The share of child ``side`` (0 left, 1 right) in ``[iou | f_l f_r]``: (..., 5·hidden)."""
    rows = slice(side * self.hidden, (side + 1) * self.hidden)
    kernel = jnp.concatenate([self.u_iou[...][rows], self.u_f.kernel[...][rows]], axis=1)
    return domain.linear(h, kernel)

  def biased(self, pre: Value, domain: Domain = iv.SOUND) -> Value:
    """The summed children's shares ``pre`` (..., 5·hidden) plus the biases: ``[i|o|u|f_l|f_r]``."""
    return domain.add(pre, jnp.concatenate([self.b_iou[...], self.u_f.bias[...]]))

  def forgotten(self, gates: Value, c_left: Value, c_right: Value, domain: Domain = iv.SOUND
                ) -> Value:
    """``σ(f_l)⊙c_l + σ(f_r)⊙c_r`` from the :meth:`biased` pre-activations (..., 5·hidden)."""
    d = domain
    f_l, f_r = (d.monotone(jax.nn.sigmoid, g) for g in _blocks(gates, self.hidden, 5)[3:])
    return d.add(d.mul_nonneg(f_l, c_left), d.mul_nonneg(f_r, c_right))

  def finish(self, gates: Value, forgotten: Value, domain: Domain = iv.SOUND) -> State:
    """(h, c) from the :meth:`biased` ``[i|o|u…]`` pre-activations (..., ≥ 3·hidden) and the
    :meth:`forgotten` term: c = σ(i)⊙tanh(u) + forgotten, h = σ(o)⊙tanh(c)."""
    d = domain
    i, o, u = _blocks(gates, self.hidden, 3)
    sig = lambda v: d.monotone(jax.nn.sigmoid, v)
    c = d.add(d.mul_nonneg(sig(i), d.monotone(jnp.tanh, u)), forgotten)
    return d.mul_nonneg(sig(o), d.monotone(jnp.tanh, c)), c

  def merge(self, pre: Value, c_left: Value, c_right: Value, domain: Domain = iv.SOUND
            ) -> State:
    """(h, c) of an internal node from the summed children's shares ``pre`` (..., 5·hidden)."""
    gates = self.biased(pre, domain)
    return self.finish(gates, self.forgotten(gates, c_left, c_right, domain), domain)

  def __call__(self, left: State, right: State, domain: Domain = iv.SOUND) -> State:
    """(h, c) of an internal node with children states ``left`` and ``right``."""
    pre = domain.add(self.child_pre_activations(left[0], 0, domain),
                     self.child_pre_activations(right[0], 1, domain))
    return self.merge(pre, left[1], right[1], domain)


def _blocks(x: Value, size: int, count: int) -> list[Value]:
  """The first ``count`` blocks of ``size`` features of ``x`` (..., ≥ count·size), by slicing."""
  return [jax.tree.map(lambda a, g=g: a[..., g * size:(g + 1) * size], x) for g in range(count)]


def flat_children(batch: TreeBatch) -> tuple[jax.Array, jax.Array]:
  """Flat ids (B·N + 1,) of every node's children; leaves, padding and the no-op row get B·N."""
  rows, n_pad = batch.shape
  base = jnp.arange(rows, dtype=jnp.int32)[:, None] * n_pad
  noop = jnp.full((1,), rows * n_pad, jnp.int32)
  flat = lambda c: jnp.concatenate([jnp.where(c >= 0, base + c, rows * n_pad).reshape(-1), noop])
  return flat(jnp.asarray(batch.left)), flat(jnp.asarray(batch.right))


def bottom_up(buffer, batch: TreeBatch, combine: Callable, params=(), *, offsets: bool = False,
              demand: Callable | None = None, capacities: tuple[int, ...] | None = None):
  """Fills the internal-node rows of a node buffer, one scheduled step at a time.

  Args:
    buffer: pytree of arrays (B·N + 1, ...), row ``b·N + n`` for node n of tree b (leaf rows
      filled in), the last row a no-op row that padded schedule entries read.
    batch: the trees and their schedule (S, W).
    combine: ``combine(params, left_rows, right_rows, nodes)`` → the rows of ``nodes`` (W,),
      given the buffer rows of their children (pytrees of (W, ...) arrays). It is differentiated
      with respect to ``params`` only: what it closes over is a constant. With ``demand``:
      ``combine(params, left_rows, right_rows, nodes, capacity)`` on all W entries, computing at
      most ``capacity`` units of work (a static int of ``capacities``).
    params: pytree of arrays (e.g. a module's ``nnx.State``) passed to every ``combine``.
    offsets: add each internal node's computed row to its input row instead of replacing it.
      With zero input rows the result is the same, and the gradient with respect to the input
      row of any node is then the gradient with respect to that node's row (its state), which
      tree HotFlip's first-order scores need (:mod:`arc_jax.attacks.tree_hotflip`).
    demand: ``demand(left_rows, right_rows, nodes)`` → int32 scalar, the units of work of a step
      (0 for a step of padding only); None: the step's entries up to its last real one.
    capacities: the increasing static capacities ``combine`` is compiled for (with ``demand``);
      each step runs the smallest one that covers its demand, the largest must cover every step.

  Returns:
    The buffer after all S steps (a ``lax.scan``): every internal node's row is computed after
    both children's rows, by the schedule's invariant. Padded entries' rows are dropped, so the
    no-op row comes back unchanged. A step computes its entries up to its last real one only
    (:func:`_by_demand`), and steps holding only padding are skipped, so a coarse bucket for S
    costs no computation.

  Differentiable in ``buffer`` and ``params`` by a custom VJP (:func:`_fill_bwd`) that costs
  O(W) rows per step, instead of autodiff's full-buffer cotangents per step.
  """
  left, right = flat_children(batch)
  schedule = jnp.asarray(batch.schedule)
  if demand is None:
    width = schedule.shape[1]
    noop = left.shape[0] - 1
    capacities = tuple(sorted({max(width // 4, 1), max(width // 2, 1), width}))
    combine = functools.partial(_on_prefix, combine)
    demand = functools.partial(_last_real, noop)
  return _fill(combine, offsets, demand, tuple(capacities), params, buffer, left, right, schedule)


def _take(tree, idx):
  """Rows ``idx`` of every array of ``tree``; out-of-range rows read as 0."""
  return jax.tree.map(lambda a: a.at[idx].get(mode="fill", fill_value=0), tree)


def _real(nodes, noop, idx):
  """``idx`` at real schedule entries, an out-of-range row (dropped or read as 0) at padding."""
  return jnp.where(nodes != noop, idx, noop + 1)


def _last_real(noop, rows_l, rows_r, nodes):
  """1 + the index of a step's last real entry (0: padding only)."""
  del rows_l, rows_r
  return jnp.max(jnp.where(nodes != noop, jnp.arange(1, nodes.shape[0] + 1), 0))


def _on_prefix(combine, params, rows_l, rows_r, nodes, w: int):
  """``combine`` on entries ``[:w]`` of a step, padded back to W rows: exact, since the entries
  left out are padding (schedules fill each step's first entries, and their last steps, near the
  roots, hold few nodes), whose results are dropped."""
  return _pad_rows(combine(params, _head(rows_l, w), _head(rows_r, w), nodes[:w]),
                   nodes.shape[0])


def _by_demand(fn, skip, capacities, demand):
  """``fn(capacity)`` for the smallest of ``capacities`` that covers ``demand``; ``skip()`` for
  a demand of 0 (``lax.switch``, so only the chosen branch runs)."""
  branch = jnp.sum(demand > jnp.asarray((0,) + capacities[:-1]))
  return jax.lax.switch(branch, [skip] + [functools.partial(fn, k) for k in capacities])


def _head(tree, w: int):
  """The first ``w`` rows of every array of ``tree``."""
  return jax.tree.map(lambda a: a[:w], tree)


def _pad_rows(tree, width: int):
  """Every array of ``tree`` padded with zero rows to ``width`` rows."""
  return jax.tree.map(lambda a: jnp.pad(a, [(0, width - a.shape[0])] + [(0, 0)] * (a.ndim - 1)),
                      tree)


def _float_only(tree):
  """``tree`` with None in place of its integer and bool arrays (which get no cotangent)."""
  return jax.tree.map(lambda x: x if jnp.issubdtype(x.dtype, jnp.inexact) else None, tree)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0, 1, 2, 3))
def _fill(combine, offsets, demand, capacities, params, buffer, left, right, schedule):
  """:func:`bottom_up` on flat child ids ``left``, ``right`` (B·N + 1,) and the schedule, with
  ``combine(params, l, r, nodes, capacity)`` run at the capacity covering ``demand(l, r, nodes)``."""
  noop = left.shape[0] - 1

  def step(buf, nodes):
    rows_l, rows_r = _take(buf, left[nodes]), _take(buf, right[nodes])
    new = _by_demand(lambda k: combine(params, rows_l, rows_r, nodes, k), lambda: rows_l,
                     capacities, demand(rows_l, rows_r, nodes))
    dest = _real(nodes, noop, nodes)
    write = (lambda a, rows: a.at[dest].add(rows, mode="drop")) if offsets else (
        lambda a, rows: a.at[dest].set(rows, mode="drop"))
    return jax.tree.map(write, buf, new), None

  return jax.lax.scan(step, buffer, schedule)[0]


def _fill_fwd(combine, offsets, demand, capacities, params, buffer, left, right, schedule):
  out = _fill.fun(combine, offsets, demand, capacities, params, buffer, left, right, schedule)
  return out, (params, out, left, right, schedule)


def _fill_bwd(combine, offsets, demand, capacities, residuals, ct_out):
  """The VJP of :func:`_fill`: a reverse scan over the schedule, one cotangent buffer.

  Correct because every real node's row is written once, by its step, after its children's rows
  and before its parent's step reads it, and leaf and no-op rows are never written: the rows a
  step read are those of the output buffer, so the step's ``combine`` is recomputed from them
  (``jax.vjp`` inside the branch of its capacity, so no branch stores residuals for another).
  Going backwards, a node's row has received its parent's share
  when its own step is reached, so its cotangent is complete there and is passed on to its
  children's rows and the params; the rows of written nodes are zeroed at the end (their input
  values were overwritten; with ``offsets`` they were added to, so their cotangent is the row's,
  complete at the end). Padded entries, whose rows are dropped, get and pass on no cotangent;
  integer and bool arrays get none (None).
  """
  params, out, left, right, schedule = residuals
  noop = left.shape[0] - 1

  def back(k, ct_rows, rows_l, rows_r, nodes):
    _, vjp = jax.vjp(lambda p, l, r: combine(p, l, r, nodes, k), params, rows_l, rows_r)
    ct_rows = jax.tree.map(
        lambda ct, x: np.zeros(x.shape, jax.dtypes.float0) if ct is None else ct,
        ct_rows, rows_l, is_leaf=lambda x: x is None)
    return _float_only(vjp(ct_rows))

  def skip(rows_l, rows_r):
    return jax.tree.map(jnp.zeros_like, _float_only((params, rows_l, rows_r)))

  def step(carry, nodes):
    ct_buf, ct_params = carry
    children = (left[nodes], right[nodes])
    rows_l, rows_r = (_take(out, c) for c in children)
    ct_rows = _take(ct_buf, _real(nodes, noop, nodes))
    g_params, g_l, g_r = _by_demand(lambda k: back(k, ct_rows, rows_l, rows_r, nodes),
                                    lambda: skip(rows_l, rows_r), capacities,
                                    demand(rows_l, rows_r, nodes))
    dest = _real(jnp.tile(nodes, 2), noop, jnp.concatenate(children))
    ct_buf = jax.tree.map(lambda ct, g_l, g_r: ct.at[dest].add(
        jnp.concatenate([g_l, g_r]), mode="drop"), ct_buf, g_l, g_r)
    return (ct_buf, jax.tree.map(jnp.add, ct_params, g_params)), None

  init = (_float_only(ct_out), jax.tree.map(jnp.zeros_like, _float_only(params)))
  ct_buf, ct_params = jax.lax.scan(step, init, schedule, reverse=True)[0]
  if not offsets:
    written = _real(schedule, noop, schedule).reshape(-1)
    ct_buf = jax.tree.map(lambda ct: ct.at[written].set(0, mode="drop"), ct_buf)
  return ct_params, ct_buf, None, None, None


_fill.defvjp(_fill_fwd, _fill_bwd)


def dropout_scale(key: jax.Array | None, rate: float, shape: tuple[int, ...], dtype
                  ) -> jax.Array | None:
  """Inverted-dropout factors (``keep / (1 − rate)``), or None (no dropout)."""
  if key is None or rate == 0.0:
    return None
  return jax.random.bernoulli(key, 1.0 - rate, shape).astype(dtype) / (1.0 - rate)


class TreeLSTMClassifier(nnx.Module):
  """Tree-LSTM classifier with logits on every node.

  Args:
    embeddings: (V, E) word vectors; row 0 is padding.
    hidden: Tree-LSTM state size and projection size (150 in the original's script).
    num_classes: K (5 for SST).
    dropout_rate: dropout on the leaf embeddings and on every node's h before the output layer
      (0.5 in the original).
    trainable_embeddings: make the embeddings an ``nnx.Param`` (the original) instead of a
      ``FrozenEmbedding`` (default).
    rngs: parameter initialisation.
    param_dtype: dtype of the parameters and embeddings (float64 in soundness tests).
  """

  def __init__(self, embeddings: np.ndarray, *, hidden: int = 150, num_classes: int = 5,
               dropout_rate: float = 0.5, trainable_embeddings: bool = False, rngs: nnx.Rngs,
               param_dtype=jnp.float32):
    check_param_dtype(param_dtype)
    kw = dict(rngs=rngs, param_dtype=param_dtype)
    table = jnp.asarray(embeddings, param_dtype)
    self.embeddings = nnx.Param(table) if trainable_embeddings else FrozenEmbedding(table)
    self.projection = Projection(embeddings.shape[1], hidden, **kw)
    self.cell = TreeLSTMCell(hidden, hidden, **kw)
    self.out = Dense(hidden, num_classes, **kw)
    for layer in (self.projection.linear, self.out):
      layer.kernel[...] = _xavier(rngs, layer.kernel[...].shape, param_dtype)
    self.hidden = hidden
    self.num_classes = num_classes
    self.dropout_rate = dropout_rate

  def embed(self, token_ids: jax.Array) -> jax.Array:
    """Word vectors (..., E) of ``token_ids`` (...); an id beyond the table gives NaN (the gather
    would clamp it to another word's vector), so nothing is certified about it."""
    return jnp.take(self.embeddings[...], token_ids, axis=0, mode="fill", fill_value=jnp.nan)

  def dropout_scales(self, key: jax.Array | None, shape: tuple[int, int]
                     ) -> tuple[jax.Array | None, jax.Array | None]:
    """Dropout factors for the leaf embeddings (B, N, E) and the node states (B, N, H)."""
    if key is None:
      return None, None
    k_in, k_out = jax.random.split(key)
    table = self.embeddings[...]
    return (dropout_scale(k_in, self.dropout_rate, shape + table.shape[1:], table.dtype),
            dropout_scale(k_out, self.dropout_rate, shape + (self.hidden,), table.dtype))

  def input_pre_activation(self, token_ids: jax.Array, scale: jax.Array | None,
                           domain: Domain | None = None) -> Value:
    """Projection pre-activations (B, N, ..., H) of words (B, N, ...), dropped out by ``scale``.

    ``scale`` (B, N, E) is broadcast over the extra axes, so a leaf's candidate words see the
    same dropout mask as its own word. With a ``domain``, the abstract value of the projection of
    the (lifted) words: it contains every rounding of the projection in the sound interval
    domain (the certification DP's input); None gives the concrete array.
    """
    x = self.embed(token_ids)
    if scale is not None:
      x = x * scale.reshape(scale.shape[:2] + (1,) * (x.ndim - 3) + scale.shape[2:])
    if domain is None:
      return self.projection.pre_activation(x)
    return self.projection.pre_activation(domain.lift(x), domain)

  def dropped(self, h: Value, scale: jax.Array | None, domain: Domain = iv.SOUND) -> Value:
    """Node states (B, N, ..., H) after dropout by ``scale`` (B, N, H), broadcast over the rest.

    Sound: one nonnegative factor per coordinate (the domain's ``scale``).
    """
    if scale is None:
      return h
    return domain.scale(h, scale.reshape(scale.shape[:2] + (1,) * (len(h.shape) - 3)
                                         + scale.shape[2:]))

  def logits(self, h: Value, scale: jax.Array | None, domain: Domain = iv.SOUND) -> Value:
    """Node states (B, N, ..., H) → logits (B, N, ..., K); arrays or abstract values."""
    return self.out(self.dropped(h, scale, domain), domain)

  def node_buffer(self, batch: TreeBatch, in_scale: jax.Array | None = None,
                  offsets: State | None = None) -> State:
    """(h, c) of every node as flat rows (B·N + 1, H): row ``b·N + n`` for node n of tree b, the
    last row zero.

    ``offsets`` (each (B·N + 1, H), zeros in practice) are added to every node's state as it is
    computed (:func:`bottom_up`), so the gradient with respect to them is each node's state
    gradient.
    """
    chex.assert_rank(batch.token_ids, 2)
    rows, n_pad = batch.shape
    leaf = lambda ids, scale: self.cell.leaf(jax.nn.relu(self.input_pre_activation(ids, scale)))
    # Without dropout a leaf's state depends on its word alone: computed once per distinct id.
    h, c = (leaf(batch.token_ids, in_scale) if in_scale is not None else
            per_distinct_id(lambda ids: leaf(ids[None], None), batch.token_ids))
    noop = jnp.zeros((1, self.hidden), h.dtype)
    buffer = tuple(jnp.concatenate([a.reshape(rows * n_pad, -1), noop]) for a in (h, c))
    if offsets is not None:  # internal rows are added to, so they start at the offsets
      leaf = jnp.concatenate([jnp.asarray(batch.left).reshape(-1) < 0, jnp.zeros(1, bool)])
      buffer = jax.tree.map(lambda a, o: jnp.where(leaf[:, None], a, 0) + o, buffer,
                            tuple(offsets))
    graphdef, cell_state = nnx.split(self.cell)
    return bottom_up(buffer, batch, lambda p, l, r, _: nnx.merge(graphdef, p)(l, r), cell_state,
                     offsets=offsets is not None)

  def node_states(self, batch: TreeBatch, in_scale: jax.Array | None = None) -> jax.Array:
    """h of every node (B, N, H) (zeros at padding)."""
    h, _ = self.node_buffer(batch, in_scale)
    return h[:-1].reshape(batch.shape + (self.hidden,))

  def __call__(self, batch: TreeBatch, dropout_key: jax.Array | None = None) -> jax.Array:
    """Logits (B, N, K) of every node (meaningless at padding nodes)."""
    in_scale, out_scale = self.dropout_scales(dropout_key, batch.shape)
    return self.logits(self.node_states(batch, in_scale), out_scale)


@functools.partial(jax.jit, static_argnums=0)
def predict_tree(graphdef: nnx.GraphDef, state: nnx.State, batch: TreeBatch) -> jax.Array:
  """Jitted evaluation-mode logits (B, N, K) of every node of ``nnx.merge(graphdef, state)``."""
  return nnx.merge(graphdef, state)(batch)
