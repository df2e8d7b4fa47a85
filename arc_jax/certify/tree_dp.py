"""The ARC memoizing DP for Tree-LSTMs (paper appendix "Handling Tree-LSTMs").

For a tree t and a tree space S (:mod:`arc_jax.perturbation.trees`), H[v, c] over-approximates
the Tree-LSTM states (h, c) of every tree that the subtree t_v becomes under *exactly* c_k
rewrites of each kind k (tight semantics), and is ⊥ when there is none. With e_k the unit vector
of axis k and d(u) the size of u's subtree when all its leaves are deletable stop words (else ∞):

leaves ``u`` with word w and input box x:
    H[u, 0]     = leaf(x_w)
    H[u, e_Sub] = leaf(α(f_Sub(w)))              if w has synonyms
    H[u, e_Dup] = cell(leaf(x_w), leaf(x_w))    if the space's 1→2 rewrite duplicates w
    H[u, c]     = ⊥ otherwise
internal nodes ``v`` with children ``l`` and ``r``:
    H[v, c] = ⊔_{c' + c'' = c} cell(H[l, c'], H[r, c''])       (merge)
              ⊔ H[r, c − d(l)·e_Del]     if d(l) ≤ c_Del         (l deleted: r takes v's place)
              ⊔ H[l, c − d(r)·e_Del]     if d(r) ≤ c_Del         (r deleted)

where α is the box of the synonyms' projections (pre-ReLU, shrunk towards the original word by ε),
then the ReLU. Every node's logits are bounded by the join over c of its slots; the root's are the
certificate.

Soundness (induction over the tree, the rules being the paper's set-level equations): a tree of
S_c(t_v) either keeps both children's subtrees (non-empty) with c split between them, and the
cell is sound for boxes, or deletes one child's whole subtree (d of its stop-word leaves) and is
the other child's tree under the remaining budget. Leaves are covered by their three rewrites.

Tighter than the original (docs/ORIGINAL.md §4, §8 item 7): slots are tight with ⊥ masks (not the
plain leaf in every slot); the merge joins *after* the cell, over whole states, where the original
joins the pre-activations of all splits and applies the nonlinearity once (``join="before_cell"``
builds that variant, for comparison: :data:`JOINS`); logits and margins are bounded per slot and
then joined (the original joins the slots first).

Layout: the decomposition grid (δ_1+1, …, δ_m+1) is flattened to C slots (row-major, the order of
``np.ndindex``). The splits (c', c'') with c' + c'' ≤ δ are P static index pairs (numpy), so a
node's merge is one batched cell call on its valid splits: a split is valid when both children's
slots are (16% of the splits of the real nodes of SST training batches, [(Del,2),(Sub,2)]). A step gathers its valid splits into K
rows, K the smallest of :func:`split_capacities` (W·P/16 … W·P) that holds their count, computes
each child's share of the gate pre-activations once per slot that a valid split uses (these are
no more than the splits, :class:`~arc_jax.nn.tree_models.TreeLSTMCell`), adds the shares of each
split and runs the rest
of the cell on the K rows; the join over the splits of each target slot is a static gather
(C, P_max) of their rows and a masked min/max. Which splits are valid depends on the trees only,
and every valid split is computed at every capacity that covers the count, so the boxes are
those of the cell on every split, whatever K. Leaves are computed for the batch's leaves at
once; internal nodes by :func:`~arc_jax.nn.tree_models.bottom_up`, W nodes per step, each step
at the capacity of its count (``lax.switch``); its gradient recomputes each step from the filled
buffer, so under ``jax.grad`` no step's (K, 5H) boxes are stored.
"""

from __future__ import annotations

import functools
import importlib
from typing import Callable, NamedTuple

import chex
import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from arc_jax import interval as iv
from arc_jax.certify.certificate import Certificate
from arc_jax.domain import Domain
from arc_jax.nn.tree_models import TreeLSTMClassifier, bottom_up, flat_children
from arc_jax.perturbation.trees import DEL, DUP, SUB, TreeBatch, TreeSignature, TreeSpace


JOINS = ("after_cell", "before_cell")
"""Where a node's merge joins the splits c' + c'' = c of a slot. ``"after_cell"``: the cell runs on
every split and the resulting states are joined (ours). ``"before_cell"``: the gate
pre-activations ``[i|o|u]`` and the forget terms ``σ(f_l)⊙c_l + σ(f_r)⊙c_r`` of the splits are
joined, and c = σ(i)⊙tanh(u) + forget and h = σ(o)⊙tanh(c) are computed once on the joins (the
original's, docs/ORIGINAL.md §4). Both are sound: each split's state lies in the finish of the joins,
since interval operations are monotone under inclusion. For the same reason ``"after_cell"`` is
contained in ``"before_cell"`` at every node: never looser, usually tighter."""


class _Tables(NamedTuple):
  """Static index arrays of a signature's decomposition (flat slots, row-major)."""

  decomposition: np.ndarray  # (C, m): the budget vector c of each slot
  pair_left: np.ndarray  # (P,) slot c' of each split
  pair_right: np.ndarray  # (P,) slot c'' of each split
  join_index: np.ndarray  # (C, P_max) splits of each target slot c = c' + c''
  join_mask: np.ndarray  # (C, P_max) which entries are real
  del_source: np.ndarray  # (δ_Del + 1, C): slot c − d·e_Del (0 where c_Del < d)
  del_ok: np.ndarray  # (δ_Del + 1, C): c_Del ≥ d ≥ 1
  unit: dict  # kind → slot of e_kind, for the kinds the space uses


@functools.lru_cache(maxsize=None)
def _tables(sig: TreeSignature) -> _Tables:
  grid = sig.grid
  dec = np.array(list(np.ndindex(*grid)), np.int64).reshape(int(np.prod(grid)), len(grid))
  strides = np.array([int(np.prod(grid[k + 1:])) for k in range(len(grid))], np.int64)
  slots = len(dec)
  left, right, target = [], [], []
  for a in range(slots):
    for b in range(slots):
      total = dec[a] + dec[b]
      if np.all(total < np.asarray(grid)):
        left.append(a)
        right.append(b)
        target.append(int(total @ strides))
  splits = [[p for p, t in enumerate(target) if t == c] for c in range(slots)]
  width = max(len(s) for s in splits)
  join_index = np.zeros((slots, width), np.int32)
  join_mask = np.zeros((slots, width), bool)
  for c, s in enumerate(splits):
    join_index[c, :len(s)] = s
    join_mask[c, :len(s)] = True
  k_del = sig.axis(DEL)
  delta = 0 if k_del is None else sig.budgets[k_del]
  del_source = np.zeros((delta + 1, slots), np.int32)
  del_ok = np.zeros((delta + 1, slots), bool)
  for d in range(1, delta + 1):
    ok = dec[:, k_del] >= d
    del_source[d] = np.where(ok, np.arange(slots) - d * strides[k_del], 0)
    del_ok[d] = ok
  unit = {kind: int(strides[sig.axis(kind)]) for kind in (DUP, SUB) if sig.axis(kind) is not None}
  return _Tables(dec.astype(np.int32), np.asarray(left, np.int32), np.asarray(right, np.int32),
                 join_index, join_mask, del_source, del_ok, unit)


def _join_over(domain: Domain, box: iv.Value, ok: jax.Array, axis: int) -> iv.Value:
  """Join along ``axis`` of the boxes whose ``ok`` is set; 0 (a finite ⊥ placeholder) if none.
  ``ok`` has the shape of ``box`` without its last (feature) axis."""
  return domain.hull(box, ok, axis, empty=domain.lift(jnp.zeros((), box.dtype)))


def _leaf_buffer(model: TreeLSTMClassifier, sig: TreeSignature, batch: TreeBatch,
                 eps: jax.Array, in_scale: jax.Array | None, domain: Domain):
  """The node buffer with the leaf rules filled in: (h, c) (B·N + 1, C, H) and valid
  (B·N + 1, C), row ``b·N + n`` for node n of tree b; internal, padding and no-op rows ⊥.

  The rules run on the leaves only, gathered into B·⌈N/2⌉ rows: a binary tree of n ≤ N nodes
  has (n + 1)/2 leaves, so none is left out. The word's own state is a box a few rounding errors
  wide in the sound interval domain (every concrete evaluation of the leaf lies inside,
  :mod:`arc_jax.interval`), not a point.
  """
  d = domain
  tables = _tables(sig)
  rows, n_pad = batch.shape
  flat = lambda x: jnp.asarray(x).reshape((1, rows * n_pad) + jnp.shape(x)[2:])
  is_leaf = flat((jnp.asarray(batch.left) < 0)
                 & (jnp.arange(n_pad)[None, :] < jnp.asarray(batch.num_nodes)[:, None]))[0]
  leaf = jnp.nonzero(is_leaf, size=rows * ((n_pad + 1) // 2), fill_value=rows * n_pad + 1)[0]
  at_leaves = lambda x: flat(x).at[:, leaf].get(mode="fill", fill_value=0)  # (1, L, ...)
  scale = None if in_scale is None else at_leaves(in_scale)
  pre = model.input_pre_activation(at_leaves(batch.token_ids), scale, d)  # (1, L, H)
  h0, c0 = model.cell.leaf(d.monotone(jax.nn.relu, pre), d)
  real = at_leaves(is_leaf[None])
  zeros = d.lift(jnp.zeros(h0.shape, h0.dtype))
  slots = [(zeros, zeros, jnp.zeros_like(real))] * len(tables.decomposition)  # ⊥
  slots[0] = (h0, c0, real)  # the word itself
  if SUB in tables.unit:
    # Every synonym's projection lies in the hull (ε = 1), and the leaf step is sound for boxes.
    candidates = model.input_pre_activation(at_leaves(batch.substitutes), scale, d)  # (1, L, R, H)
    mask = at_leaves(batch.substitute_mask)
    box = d.shrink_towards(d.hull(candidates, mask, axis=2, empty=pre), pre, eps)
    h, c = model.cell.leaf(d.monotone(jax.nn.relu, box), d)
    slots[tables.unit[SUB]] = (h, c, real & jnp.any(mask, axis=2))
  if DUP in tables.unit:
    # The one tree of a duplicated leaf, (w, w), where the space's 1→2 rewrite matches w.
    h, c = model.cell((h0, c0), (h0, c0), d)
    slots[tables.unit[DUP]] = (h, c, real & at_leaves(batch.duplicable))
  stack = lambda parts: jax.tree.map(lambda *a: jnp.stack(a, axis=2)[0], *parts)  # (L, C, ...)
  place = lambda x: jnp.zeros((rows * n_pad + 1,) + x.shape[1:], x.dtype).at[leaf].set(
      x, mode="drop")
  return jax.tree.map(place, tuple(stack([s[i] for s in slots]) for i in range(3)))


def _merge_rule(cell_graph: nnx.GraphDef, sig: TreeSignature, deletable: jax.Array,
                children: tuple[jax.Array, jax.Array], join: str, domain: Domain) -> Callable:
  """The internal-node rules as a :func:`bottom_up` combine function on (h, c, valid) rows,
  with the Tree-LSTM cell's state (``nnx.split(model.cell)``) as its params and the number of
  valid splits it computes (:func:`_valid_splits`, at most ``capacity``) as its capacity."""
  tables = _tables(sig)
  a, b = tables.pair_left, tables.pair_right
  dom = domain

  def combine(cell_state, left, right, nodes, capacity):
    cell = nnx.merge(cell_graph, cell_state)
    (h_l, c_l, ok_l), (h_r, c_r, ok_r) = left, right  # (W, C, H) abstract values, (W, C)
    # Merge: the cell on every valid split (c', c'') of both children's slots (sound for boxes),
    # then the join over the splits of each target c = c' + c''. Only the valid splits are
    # computed: they are gathered into ``capacity`` rows (the step's demand, so none is left
    # out), in the order of their flat index; ⊥ splits contribute nothing to a join.
    ok_p = ok_l[:, a] & ok_r[:, b]  # (W, P)
    flat_ok = ok_p.reshape(-1)
    split = jnp.nonzero(flat_ok, size=capacity, fill_value=0)[0]  # (K,) flat ids w·P + p
    entry, pair = split // len(a), split % len(a)
    slots = len(tables.decomposition)
    child_slot = lambda side: entry * slots + jnp.asarray(side)[pair]  # (K,) flat ids w·C + c
    flat = lambda x: jax.tree.map(lambda v: v.reshape((-1,) + v.shape[2:]), x)  # (W·C, ...)

    def share(h, side_slots, side):
      """The child's share (K, 5H) of each computed split's pre-activations, computed once per
      child slot that a valid split uses (these are no more than the valid splits)."""
      used = jnp.any(ok_p[:, :, None] & (side_slots[:, None] == np.arange(slots)), axis=1)
      used = used.reshape(-1)  # (W·C,)
      row = jnp.nonzero(used, size=min(capacity, used.shape[0]), fill_value=0)[0]
      box = cell.child_pre_activations(jax.tree.map(lambda v: v[row], flat(h)), side, dom)
      position = jnp.cumsum(used) - 1  # of each used slot among the rows
      return jax.tree.map(lambda v: v[position[child_slot(side_slots)]], box)

    pre = dom.add(share(h_l, a, 0), share(h_r, b, 1))  # (K, 5H)
    c_pairs = tuple(jax.tree.map(lambda v: v[child_slot(side)], flat(c))
                    for c, side in ((c_l, a), (c_r, b)))
    ok = ok_p[:, tables.join_index] & tables.join_mask  # (W, C, P_max)
    position = (jnp.cumsum(flat_ok) - 1).reshape(ok_p.shape)[:, tables.join_index]
    splits = lambda box: _join_over(dom, jax.tree.map(lambda v: v[position], box), ok, axis=2)
    if join == "after_cell":
      h, c = (splits(box) for box in cell.merge(pre, *c_pairs, dom))
    else:  # "before_cell", the original's: join [i|o|u] and the forget term, then finish once
      gates = cell.biased(pre, dom)
      forgotten = cell.forgotten(gates, *c_pairs, dom)
      iou = jax.tree.map(lambda v: v[..., :3 * cell.hidden], gates)
      h, c = cell.finish(splits(iou), splits(forgotten), dom)
    valid = jnp.any(ok, axis=2)
    if len(tables.del_source) > 1:
      # Deletion: when one child's subtree goes (d ≤ c_Del stop words), the tree is one of the
      # sibling's trees under c − d·e_Del, so that slot of the sibling is joined in as it is.
      delta = len(tables.del_source) - 1
      for sibling, gone in (((h_r, c_r, ok_r), children[0][nodes]),
                            ((h_l, c_l, ok_l), children[1][nodes])):
        d = deletable[gone]
        d = jnp.where(d <= delta, d, 0)  # (W,): too big to delete within δ_Del: no rule
        src = jnp.asarray(tables.del_source)[d]  # (W, C)
        take = lambda x: jnp.take_along_axis(x, src[..., None], axis=1)
        lifted_ok = jnp.asarray(tables.del_ok)[d] & jnp.take_along_axis(sibling[2], src, axis=1)
        lifted_h, lifted_c = (jax.tree.map(take, box) for box in sibling[:2])
        h, _ = dom.masked_join(h, valid, lifted_h, lifted_ok)
        c, valid = dom.masked_join(c, valid, lifted_c, lifted_ok)
    return h, c, valid

  return combine


def _valid_splits(sig: TreeSignature, noop: int, left, right, nodes) -> jax.Array:
  """The number of valid splits (both children's slots valid) of a step's entries: the work of
  its merge. Padding entries read the no-op row, whose slots are all invalid; a step with a real
  entry counts at least 1 (every real node has the valid split (0, 0)), so it is never skipped."""
  tables = _tables(sig)
  count = jnp.sum(left[2][:, tables.pair_left] & right[2][:, tables.pair_right])
  return jnp.maximum(count, jnp.any(nodes != noop).astype(count.dtype))


def split_capacities(sig: TreeSignature, width: int) -> tuple[int, ...]:
  """The numbers of valid splits a merge step is compiled for: W·P/16, W·P/8, …, W·P (every
  split of W nodes, so no step exceeds the largest)."""
  total = width * len(_tables(sig).pair_left)
  return tuple(sorted({-(-total // 2 ** e) for e in range(5)}))


def certified_node_states(model: TreeLSTMClassifier, sig: TreeSignature, batch: TreeBatch,
                          eps: jax.Array, in_scale: jax.Array | None = None,
                          join: str = "after_cell", domain: Domain = iv.SOUND
                          ) -> tuple[iv.Value, jax.Array]:
  """The DP: boxes of h for every node and slot, (B, N, C, H), and their validity (B, N, C).

  Slot 0 of every real node is the point state of the unperturbed subtree. ``join`` (one of
  :data:`JOINS`) is where the merge joins the splits of a slot; ``domain`` (static) the abstract
  domain of the states.
  """
  chex.assert_rank(batch.token_ids, 2)
  rows, n_pad = batch.shape
  buffer = _leaf_buffer(model, sig, batch, eps, in_scale, domain)
  deletable = jnp.concatenate([jnp.asarray(batch.deletable).reshape(-1),
                               jnp.zeros((1,), jnp.int32)])
  cell_graph, cell_state = nnx.split(model.cell)
  combine = _merge_rule(cell_graph, sig, deletable, flat_children(batch), join, domain)
  h, _, valid = bottom_up(buffer, batch, combine, cell_state,
                          demand=functools.partial(_valid_splits, sig, rows * n_pad),
                          capacities=split_capacities(sig, batch.schedule.shape[1]))
  unflat = lambda x: x[:-1].reshape((rows, n_pad) + x.shape[1:])
  return jax.tree.map(unflat, h), unflat(valid)


def check_domain(domain: Domain) -> None:
  """Refuses a domain that refines the intervals (the linear-step domain): its extra rules are the
  LSTM cell's, which the tree cell does not use, so it would compute plain intervals."""
  if domain.refines is not None:
    raise ValueError(f"The Tree-LSTM DP has rules for the interval domains only "
                     f"(arc_jax.interval.SOUND, arc_jax.interval.UNROUNDED), not "
                     f"{type(domain).__name__}: certify trees with domain=arc_jax.interval.SOUND "
                     "(the default).")


def certify_tree_model(model: TreeLSTMClassifier, space: TreeSpace | TreeSignature,
                       batch: TreeBatch, labels: jax.Array, eps: jax.Array | float = 1.0,
                       dropout_key: jax.Array | None = None, domain: Domain = iv.SOUND, *,
                       budgets: jax.Array | None = None, join: str = "after_cell"
                       ) -> Certificate:
  """Certifies a batch of trees, every node (a :class:`~arc_jax.certify.Certificate` with a node
  axis: its ``certified`` is the root's); differentiable in the model.

  :func:`arc_jax.certify.certify_model` dispatches Tree-LSTMs here.

  Args:
    model: the classifier.
    space: the tree space the batch was built for (or its signature).
    batch: the trees, lowered by :class:`~arc_jax.perturbation.trees.TreeBatchBuilder` with the
      same space.
    labels: int (B, N) label of every node, -1 for none (``batch.labels``).
    eps: Sub hull scale in [0, 1] (1 = the full space; smaller is the training curriculum).
    dropout_key: applies the model's dropout (training); None for certification.
    budgets: int (m,), certify the space with these budgets instead (a traced array: one
      compilation serves every budget vector, e.g. a δ sweep). Slots are tight, so the smaller
      space's trees are exactly those of the slots c ≤ budgets. Budgets above the signature's
      give infinite bounds and no certificate (the DP did not compute those slots).
    join: ``"after_cell"`` (default: the cell on every split, then the join of the states) or
      ``"before_cell"`` (the original's: the join of every split's gate pre-activations and
      forget terms, then the rest of the cell once), see :data:`JOINS`.
    domain: the abstract domain (static; :data:`arc_jax.interval.SOUND` for a certificate that
      holds in floating point, :data:`arc_jax.interval.UNROUNDED` in training objectives).
  """
  chex.assert_shape(labels, batch.shape)
  if join not in JOINS:
    raise ValueError(f"Unknown join {join!r}; choose one of {JOINS}.")
  check_domain(domain)
  sig = space.signature
  if not isinstance(sig, TreeSignature):
    raise TypeError(f"Trees are certified under a tree space; got {space}: use "
                    "arc_jax.perturbation.trees.tree_space(space).")
  if batch.signature != sig:
    raise ValueError(f"The batch was lowered for {batch.signature}, not for {sig}: build it with "
                     "TreeBatchBuilder(vocab, space) for the space it is certified under.")
  rows, n_pad = batch.shape
  in_scale, out_scale = model.dropout_scales(dropout_key, batch.shape)
  h, valid = certified_node_states(model, sig, batch, jnp.asarray(eps, jnp.float32), in_scale,
                                   join, domain)
  beyond = jnp.asarray(False)
  if budgets is not None:
    budgets = jnp.asarray(budgets)
    chex.assert_shape(budgets, (len(sig.budgets),))
    valid = valid & jnp.all(_tables(sig).decomposition <= budgets, axis=1)
    beyond = jnp.any(budgets > np.asarray(sig.budgets, np.int32))
  features = model.dropped(h, out_scale, domain)  # (B, N, C, H)
  logits = _join_over(domain, model.out(features, domain), valid, axis=2)
  logits = domain.to_box(domain.where(beyond, domain.top(logits), logits))
  labelled = labels >= 0
  y = jnp.where(labelled, labels, 0)
  pairs = domain.margin_lower_bounds(features, model.out.kernel[...], model.out.bias[...])
  per_slot = jnp.take_along_axis(pairs, y[:, :, None, None, None], axis=3)[:, :, :, 0]
  margins = jnp.min(jnp.where(valid[..., None], per_slot, jnp.inf), axis=2)
  margins = jnp.where(beyond, -jnp.inf, margins)
  others = jnp.arange(model.num_classes) != y[..., None]
  margins = jnp.where(labelled[..., None] & others & jnp.any(valid, axis=2)[..., None],
                      margins, 0.0)
  root = jnp.maximum(jnp.asarray(batch.num_nodes) - 1, 0)
  at_root = lambda x: x[jnp.arange(rows), root]
  certified = (jnp.all(jnp.where(at_root(others), at_root(margins) > 0, True), axis=1)
               & at_root(labelled) & (jnp.asarray(batch.num_nodes) > 0))
  clean = (model.out(domain.representative(jax.tree.map(lambda a: a[:, :, 0], features)))
           if domain.exact_on_points  # see Domain.exact_on_points
           else model.logits(model.node_states(batch, in_scale), out_scale))
  return Certificate(logits, clean, margins, certified, root)


def __getattr__(name):
  """The names of the previous release (``certify_tree_jit``, ``make_tree_certify_fn``,
  ``TreeCertificate``), kept for one release with a DeprecationWarning
  (:mod:`arc_jax.certify.deprecated`)."""
  return importlib.import_module("arc_jax.certify.deprecated").tree_dp_attribute(name)
