"""The ARC memoizing DP for the sequence classifiers: LSTMs, Bi-LSTMs and the same models around
another recurrent cell (docs/ALGORITHM.md §2, paper §4).

For a sentence x_1..x_n and a space S = {(T_k, δ_k)}, H[j, c] over-approximates the cell's carry
((h, c) for the LSTM, (h,) for the GRU) of every string obtained from the prefix x_1..x_j by
applying *exactly* c_k copies of each T_k (tight semantics). With H[0, 0] the zero carry and
every other H[0, c] = ⊥:

    H[j, c] = cell(x_j, H[j-1, c])
              ⊔  ⊔_{k : c_k ≥ 1, φ_k(x_{j-s_k+1..j})}  cell^{t_k}(α_{k,1}, …, α_{k,t_k}; H[j-s_k, c-e_k])

where α_{k,l} is the box of the l-th output token of T_k's replacements (hull of their projected
embeddings before the ReLU, optionally shrunk towards the original token by ε), and cell^0 is the
identity (a deletion).

Soundness (induction on j): a string in the set of H[j, c] either leaves x_j untouched (then its
prefix before x_j is in the set of H[j-1, c] and the cell step is sound in the domain) or ends
with a replacement r of T_k applied at the window ending at j (then its prefix is in the set of
H[j-s_k, c-e_k], and feeding r_1..r_{t_k}, each inside α_{k,l}, is covered by t_k sound steps).
Windows are non-overlapping because the source state is indexed before the window.

Layout: the decomposition is a grid axis per transformation, shape (δ_1+1, …, δ_m+1), so
"c − e_k for all c with c_k ≥ 1" is a slice ``[:-1]`` of axis k written into ``[1:]``: no gathers,
no Python loop over slots. One ``lax.scan`` over positions carries a window of the last
max_k s_k states; padded positions leave the state unchanged, so each sentence of a batch gets
exactly its own answer. Empty (⊥) slots carry a validity mask and finite placeholder values that
never reach a valid join.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from arc_jax import interval as iv
from arc_jax.domain import Domain, concatenate, lift_input
from arc_jax.nn.models import LSTMClassifier
from arc_jax.nn.recurrent import RecurrentCell, initial_carry
from arc_jax.perturbation.plans import Plan, plan_word_ids, reverse_plan
from arc_jax.perturbation.spaces import Signature


def _anchor_offsets(s: int, t: int) -> list[int]:
  """For output place l of an s→t rewrite, the window token whose point ε = 0 shrinks towards.

  The last t tokens of the window for t ≤ s (Sub, Trans1–3), the first ones for t > s (Dup).
  """
  return [min(max(l + s - t, 0), s - 1) for l in range(t)]


def _projected_ids(model: LSTMClassifier, plan: Plan, sig: Signature) -> int:
  """How many ids the DP projects without a word table: every direction's tokens, and the
  replacements and window anchors of each transformation that brings words of its own."""
  tokens = plan.token_ids.size
  own = sum(tp.replacement_ids.size + tokens * t
            for t, repeats, tp in zip(sig.t, sig.repeats, plan.transformations)
            if t > 0 and not repeats)
  return len(model.cells) * (tokens + own)


def word_pre_activations(model: LSTMClassifier, plan: Plan, sig: Signature,
                         domain: Domain = iv.SOUND) -> Callable[[jax.Array], iv.Value]:
  """A function from word ids (any shape S) to boxes (S + (F,)) of the projection's
  pre-activations (the ReLU's input) of those words, enclosing every rounding of the projection.

  With ``plan.distinct_words`` the distinct ids of the plan (its tokens and replacements) are
  embedded and projected once, then looked up by binary search: a batch repeats its words (the
  same synonyms and stop words at many positions; 4–33× fewer distinct ids than entries in
  SST-2 test batches of 32). Each row's box is sound for its word wherever the word stands
  (:func:`arc_jax.interval.linear` holds for every summation order). The table holds every id of
  ``plan`` and of plans made from it by dropping ids (:func:`reverse_plan`, fewer rows), since
  :class:`Plan` refuses a bound below its count of distinct ids. Where the DP would project
  no more ids than the table holds (a space of deletions and repetitions projects only the
  tokens: 768 ids of a 32 × 24 batch against a table of 2,048) they are projected directly.
  """
  project = lambda ids: model.projection.pre_activation(lift_input(domain, model.embed(ids)),
                                                        domain)
  if plan.distinct_words is None or plan.distinct_words >= _projected_ids(model, plan, sig):
    return project
  # Filled with the largest id, so the table stays sorted for the binary search.
  ids = jnp.concatenate([jnp.ravel(a) for a in plan_word_ids(plan)])
  words = jnp.unique(ids, size=plan.distinct_words, fill_value=jnp.max(ids))
  table = project(words)

  def lookup(ids: jax.Array) -> iv.Value:
    rows = jnp.searchsorted(words, ids, method="scan_unrolled")  # < size: ids ≤ the fill
    # Stored once: fused into the gathers, the search ran again for every feature of each row.
    rows = jax.lax.optimization_barrier(rows)
    return jax.tree.map(lambda a: a[rows], table)

  return lookup


def replacement_gates(model: LSTMClassifier, cell: RecurrentCell, plan: Plan, sig: Signature,
                      eps: jax.Array, domain: Domain = iv.SOUND,
                      words: Callable[[jax.Array], iv.Value] | None = None
                      ) -> list[iv.Value | None]:
  """Input-gate boxes of every replacement place: per k a value (B, N, t_k, G) of ``domain``,
  or None for a deletion (t_k = 0) and for a repetition (``sig.repeats``: every copy is the
  window token itself, so the DPs feed its own input gates and nothing is built here).

  The hull is taken over the projected embeddings (pre-ReLU; boxes enclosing every rounding of
  the projection, :func:`arc_jax.interval.linear`) of the words that can stand at each output place,
  then shrunk towards the projection of the original window token by ``eps``.
  Positions where nothing matches get the anchor point (finite; the DP masks them out).
  ``words`` is :func:`word_pre_activations` of a plan holding this one's ids (made here if None).
  """
  n_pad = plan.token_ids.shape[1]
  words = word_pre_activations(model, plan, sig, domain) if words is None else words
  out = []
  for s, t, repeats, tp in zip(sig.s, sig.t, sig.repeats, plan.transformations):
    if t == 0 or repeats:
      out.append(None)
      continue
    candidates = words(tp.replacement_ids)
    offsets = jnp.asarray(_anchor_offsets(s, t))
    anchor_pos = jnp.clip(jnp.arange(n_pad)[:, None] - s + 1 + offsets[None, :], 0, n_pad - 1)
    anchor = words(plan.token_ids[:, anchor_pos])
    box = domain.hull(candidates, tp.replacement_mask, axis=3, empty=anchor)
    box = domain.shrink_towards(box, anchor, eps)
    out.append(cell.input_gates(domain.monotone(jax.nn.relu, box), domain))
  return out


def _grid_broadcast(x: jax.Array, grid_rank: int) -> jax.Array:
  """(B, F) → (B, 1, …, 1, F) to broadcast over the decomposition grid."""
  return x.reshape(x.shape[:1] + (1,) * grid_rank + x.shape[1:])


def _drop_last(x: jax.Array, axis: int) -> jax.Array:
  """All but the last slot along ``axis``: the sources c − e_k of the slots c with c_k ≥ 1."""
  return jax.lax.slice_in_dim(x, 0, x.shape[axis] - 1, axis=axis)


def _join_landing(domain: Domain, values: list, valid: jax.Array, news: list,
                  news_valid: jax.Array, axis: int) -> tuple[list, jax.Array]:
  """Joins a branch's results ``news``, computed from the slots c − e_k, into the slots c
  (c_k ≥ 1) of the grid ``values``: values (B, *g, F) with validity (B, *g), ``news`` one slot
  shorter along ``axis``. Slots c_k = 0 keep their values and only the others are joined, so
  no padded copy of the branch is made. Returns (values, valid).
  """
  first = lambda a: jax.lax.slice_in_dim(a, 0, 1, axis=axis)
  rest = lambda a: jax.lax.slice_in_dim(a, 1, None, axis=axis)
  landing_valid = rest(valid)
  out = []
  for value, new in zip(values, news):
    joined, _ = domain.masked_join(jax.tree.map(rest, value), landing_valid, new, news_valid)
    out.append(concatenate([jax.tree.map(first, value), joined], axis))
  return out, jnp.concatenate([first(valid), landing_valid | news_valid], axis)


def memoizing_scan(cell: RecurrentCell, sig: Signature, point_gates: iv.Value,
                   repl_gates: list[iv.Value | None], matches: list[jax.Array],
                   lengths: jax.Array, track_sums: bool, keeps: jax.Array | None = None,
                   domain: Domain = iv.SOUND):
  """Runs the DP over all positions for one direction.

  Args:
    cell: the recurrent cell.
    sig: s_k, t_k, δ_k of the space (static).
    point_gates: (B, N, G), input gates of the original tokens (in the sound interval domain,
      boxes a few rounding errors wide: every concrete evaluation of them lies inside).
    repl_gates: per k, (B, N, t_k, G), or None for t_k = 0 and for repetitions.
    matches: per k, bool (B, N): φ_k holds for the window ending at j.
    lengths: (B,).
    track_sums: also carry, per slot, the box of the sum of h over the emitted positions
      (for mean pooling).
    keeps: optional bool (B, N): where False, the branch "keep x_j" is invalid (Plan.keep).
    domain: the abstract domain of the states (static).

  Returns:
    (carry, valid, sums): the final H[n, ·], the cell's carry (a tuple of abstract values of
    shape (B, δ_1+1, …, δ_m+1, H), h first), its validity (B, δ_1+1, …), and the sums box (or None).
  """
  d = domain
  batch, n_pad, _ = point_gates.shape
  dims = sig.grid
  rank = len(dims)
  window = max(sig.s, default=1)
  hidden = cell.hidden
  zeros = jnp.zeros((window, batch) + dims + (hidden,), point_gates.dtype)
  valid0 = jnp.zeros((window, batch) + dims, bool).at[(0, slice(None)) + (0,) * rank].set(True)
  box0 = d.lift(zeros)
  carry0 = (initial_carry(cell, box0), valid0, box0 if track_sums else None)

  time_major = lambda a: jnp.swapaxes(a, 0, 1)
  keeps = jnp.ones((batch, n_pad), bool) if keeps is None else keeps
  xs = (jax.tree.map(time_major, point_gates),
        time_major(jnp.arange(n_pad)[None, :] < lengths[:, None]),
        time_major(keeps), [time_major(m) for m in matches],
        [None if g is None else jax.tree.map(time_major, g) for g in repl_gates])

  def body(carry, x):
    states, valid, sums = carry  # each carried value and the validity hold a window of H[j − i]
    last = tuple(a[0] for a in states)  # H[j − 1]
    before = lambda s: tuple(a[s - 1] for a in states)  # H[j − s]
    gates, real, keep_j, match_j, repl_j = x
    # Branch "keep x_j", then one branch per transformation: the source grid (for T_k the slots
    # c − e_k of H[j − s_k], i.e. all but the last slot along axis k), its validity, running
    # sums, the input-gate boxes of the steps to feed, and the grid axis of k.
    # The recurrent map of every H[j-1, c], once: the keep step reads all of them and the first
    # step of every window-1 replacement (Sub) reads the slots c − e_k among them.
    shared = cell.recurrent(last[0], d)
    keep = (last, valid[0] & _grid_broadcast(keep_j, rank),
            sums[0] if track_sums else None, [gates], None, shared)
    branches, repeats = [keep], []
    for k, (s, t) in enumerate(zip(sig.s, sig.t)):
      if sig.budgets[k] == 0:
        continue
      head = functools.partial(_drop_last, axis=1 + k)
      ok = head(valid[s - 1]) & _grid_broadcast(match_j[k], rank)
      if sig.repeats[k]:
        # (x_j, …, x_j): the first copy is the keep step from slots c − e_k, computed below;
        # the others feed x_j's own gates.
        repeats.append((head, ok, [gates] * (t - 1), 1 + k))
        continue
      steps = [repl_j[k][:, l] for l in range(t)]
      src = jax.tree.map(head, before(s))
      total = jax.tree.map(head, sums[s - 1]) if track_sums else None
      recurrent = jax.tree.map(head, shared) if s == 1 and t > 0 else None
      branches.append((src, ok, total, steps, 1 + k, recurrent))
    outputs = _run_steps(cell, [(b[0], b[2], b[3], b[5]) for b in branches], track_sums, d,
                         materialise=bool(repeats))
    kept = outputs[0]
    for head, ok, steps, axis in repeats:
      src, total = jax.tree.map(head, kept)
      branches.append((src, ok, total, steps, axis, None))
    if repeats:
      outputs += _run_steps(cell, [(b[0], b[2], b[3], None) for b in branches[-len(repeats):]],
                            track_sums, d, materialise=True)
    # The keep branch covers the whole grid; T_k's results land in the slots c with c_k ≥ 1.
    # A padding position keeps H[j − 1]: it replaces the keep branch's values and no other branch
    # joins there, so the selects run inside the joins' loops instead of a pass of their own.
    keep = _grid_broadcast(real, rank)
    (state, total), ok = kept, jnp.where(keep, branches[0][1], valid[0])
    size = len(state)
    values = [d.where(keep[..., None], a, b) for a, b in zip(state, last)]
    if track_sums:
      values.append(d.where(keep[..., None], total, sums[0]))
    for (_, b_ok, _, _, axis, _), (b_state, b_total) in zip(branches[1:], outputs[1:]):
      news = list(b_state) + ([b_total] if track_sums else [])
      values, ok = _join_landing(d, values, ok, news, b_ok & keep, axis)
    push = lambda new, old: jax.tree.map(lambda a, b: jnp.concatenate([a[None], b[:-1]]), new, old)
    new_carry = (tuple(map(push, values[:size], states)), push(ok, valid), None)
    if track_sums:
      new_carry = new_carry[:2] + (push(values[size], sums),)
    return new_carry, None

  # Positions past the batch's longest sentence change nothing (every row is padding there), so
  # they skip the body: a length bucket pads sorted certification batches by 6% of their steps.
  longest = jnp.max(lengths)

  def step(carry, x):
    position, x = x
    return jax.lax.cond(position < longest, body, lambda carry, _: (carry, None), carry, x)

  # Rematerialise the body in the backward pass instead of storing every step's intermediates:
  # memory traffic, not FLOPs, bounds this DP (benchmarks/README.md has the measurement).
  (states, valid, sums), _ = jax.lax.scan(jax.checkpoint(step), carry0, (jnp.arange(n_pad), xs))
  return tuple(a[0] for a in states), valid[0], (sums[0] if track_sums else None)


def _run_steps(cell: RecurrentCell, branches, track_sums: bool, domain: Domain,
               materialise: bool = False):
  """Feeds each branch's input boxes to its source states.

  Args:
    branches: list of (carry, sums, steps, recurrent): grid-shaped abstract carries, each value
      (B, *g, H) (each branch its own grid g), their running sums (or None), the list of gate
      boxes (B, G) to feed in order (empty for a deletion), and the recurrent pre-activations
      ``cell.recurrent(h)`` (B, *g, G) of the sources when already computed (else None).
    materialise: compute each new state once and store it (an optimisation barrier). Where a
      repetition's second copy reads the keep step's states, XLA otherwise fuses the cell's
      elementwise rest into every consumer (the joins, the next product's operands) and
      recomputes it there, which costs more than storing it (measured in benchmarks/README.md).

  Returns:
    list of (carry, sums) per branch after all its steps. At step l the recurrent products
    not computed before run as one matmul over the concatenated slots of the live branches; the
    elementwise rest of the cell runs per branch (it gains nothing from concatenation, which
    would copy every operand).
  """
  out = [(state, total) for state, total, _, _ in branches]
  for l in range(max((len(steps) for _, _, steps, _ in branches), default=0)):
    live = [i for i, (_, _, steps, _) in enumerate(branches) if len(steps) > l]
    known = {i: branches[i][3] for i in live if l == 0 and branches[i][3] is not None}
    missing = [i for i in live if i not in known]
    if missing:
      shapes = [out[i][0][0].shape for i in missing]
      rows = [int(np.prod(shape[1:-1])) for shape in shapes]
      flat = lambda a, r: a.reshape(a.shape[0], r, a.shape[-1])
      h = jax.tree.map(lambda *a: jnp.concatenate(a, axis=1),
                       *[flat(out[i][0][0], r) for i, r in zip(missing, rows)])
      products = cell.recurrent(h, domain)
      offsets = np.cumsum([0] + rows)
      for i, shape, a, b in zip(missing, shapes, offsets[:-1], offsets[1:]):
        known[i] = products[:, a:b].reshape(shape[:-1] + (products.shape[-1],))
    for i in live:
      carry, total = out[i]
      gates = branches[i][2][l]
      gates = jax.tree.map(lambda a: _grid_broadcast(a, len(carry[0].shape) - 2), gates)
      new = cell.step(carry, gates, known[i], domain)
      if materialise:
        new = jax.lax.optimization_barrier(new)
      out[i] = (new, domain.add(total, new[0]) if track_sums else None)
  return out


def _join_slots(box: iv.Value, valid: jax.Array, domain: Domain) -> iv.Value:
  """Join over the decomposition grid of the valid slots: (B, *dims, H) → (B, H)."""
  batch, hidden = box.shape[0], box.shape[-1]
  flat = jax.tree.map(lambda a: a.reshape(batch, -1, hidden), box)
  return domain.hull(flat, valid.reshape(batch, -1), axis=1)


def _origin(x: jax.Array, rank: int) -> jax.Array:
  """Slot c = 0 of a grid array (B, *dims, H): the unperturbed sentence."""
  return x[(slice(None),) + (0,) * rank]


def _slot_lengths(sig: Signature, lengths: jax.Array) -> jax.Array:
  """Output length of every slot, n + Σ_k c_k (t_k − s_k), at least 1: (B, *dims)."""
  growth = sig.decomposition() @ (np.asarray(sig.t, np.int32) - np.asarray(sig.s, np.int32))
  grid = jnp.asarray(growth.reshape(sig.grid))
  return jnp.maximum(lengths.reshape((-1,) + (1,) * grid.ndim) + grid[None], 1)


def certified_features(model: LSTMClassifier, sig: Signature, plan: Plan, eps: jax.Array,
                       domain: Domain = iv.SOUND) -> tuple[iv.Value, jax.Array]:
  """Boxes of the pooled features over S(x), and the features of x itself.

  A plan with ``reachable`` budgets (:func:`~arc_jax.perturbation.plans.on_reachable_grid`) runs
  the DP on the grid cut to them: every slot it keeps is computed as on the full grid (slot c
  reads only slots c' ≤ c) and every slot it drops is ⊥, so the boxes are the same.

  Returns:
    (box, clean): abstract value of ``domain`` (B, H_in) and array (B, H_in),
    H_in = hidden · (2 if bidirectional).

  Raises:
    ValueError: a model that pools otherwise than by the final state or the mean (attention:
      :func:`~arc_jax.certify.attention_dp.attention_features`).
  """
  if model.pooling not in ("final", "mean"):
    raise ValueError(f"certified_features bounds the final state or the mean of the states, not "
                     f"pooling={model.pooling!r}: certify with arc_jax.certify.certify_model, "
                     "which picks the DP of the model's pooling.")
  sig = sig.signature
  if plan.reachable is not None:  # the plan's rows reach no slot beyond these budgets
    if len(plan.reachable) != len(sig.budgets):
      raise ValueError(f"The plan's reachable budgets {plan.reachable} are not of the space "
                       f"{sig}: lower the plan for the space it is certified under.")
    sig = dataclasses.replace(sig, budgets=tuple(map(min, sig.budgets, plan.reachable)))
  plan = jax.tree.map(jnp.asarray, plan)  # host (numpy) plans may be closed over under a trace
  plans = [plan] + ([reverse_plan(plan, sig)] if model.bidirectional else [])
  rank = len(sig.budgets)
  words = word_pre_activations(model, plan, sig, domain)  # the reversed plan holds the same ids
  boxes, cleans = [], []
  for cell, p in zip(model.cells, plans):
    z = domain.monotone(jax.nn.relu, words(p.token_ids))
    (h, *_), valid, sums = memoizing_scan(
        cell, sig, cell.input_gates(z, domain),
        replacement_gates(model, cell, p, sig, eps, domain, words),
        [tp.match for tp in p.transformations], p.lengths, track_sums=model.pooling == "mean",
        keeps=p.keep, domain=domain)
    if model.pooling == "mean":
      h = domain.divide(sums, _slot_lengths(sig, p.lengths)[..., None].astype(z.dtype))
    boxes.append(_join_slots(h, valid, domain))
    cleans.append(domain.representative(jax.tree.map(lambda a: _origin(a, rank), h)))
  if not domain.exact_on_points:  # slot 0 is x's box, not x's point: see Domain.exact_on_points
    return concatenate(boxes), model.features(plan.token_ids, plan.lengths)
  return concatenate(boxes), jnp.concatenate(cleans, -1)
