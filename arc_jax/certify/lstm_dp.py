"""The ARC memoizing DP for LSTMs and Bi-LSTMs (DESIGN.md §3, paper §4).

For a sentence x_1..x_n and a space S = {(T_k, δ_k)}, H[j, c] over-approximates the LSTM states
(h, c) of every string obtained from the prefix x_1..x_j by applying *exactly* c_k copies of each
T_k (tight semantics). With H[0, 0] = (h0, c0) and every other H[0, c] = ⊥:

    H[j, c] = cell(x_j, H[j-1, c])
              ⊔  ⊔_{k : c_k ≥ 1, φ_k(x_{j-s_k+1..j})}  cell^{t_k}(α_{k,1}, …, α_{k,t_k}; H[j-s_k, c-e_k])

where α_{k,l} is the box of the l-th output token of T_k's replacements (hull of their projected
embeddings before the ReLU, optionally shrunk towards the original token by ε), and cell^0 is the
identity (a deletion).

Soundness (induction on j): a string in the set of H[j, c] either leaves x_j untouched (then its
prefix before x_j is in the set of H[j-1, c] and the LSTM step is sound for boxes) or ends with a
replacement r of T_k applied at the window ending at j (then its prefix is in the set of
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

import jax
import jax.numpy as jnp
import numpy as np

from arc_jax import interval as iv
from arc_jax.nn.cells import LSTMCell
from arc_jax.nn.models import LSTMClassifier
from arc_jax.perturbation.plans import Plan, reverse_plan
from arc_jax.perturbation.spaces import Space


def _anchor_offsets(s: int, t: int) -> list[int]:
  """For output place l of an s→t rewrite, the window token whose point ε = 0 shrinks towards.

  The last t tokens of the window for t ≤ s (Sub, Trans1–3), the first ones for t > s (Dup).
  """
  return [min(max(l + s - t, 0), s - 1) for l in range(t)]


def replacement_gates(model: LSTMClassifier, cell: LSTMCell, plan: Plan, space: Space,
                      eps: jax.Array) -> list[iv.Interval]:
  """Input-gate boxes of every replacement place: per k an Interval (B, N, t_k, 4H).

  The hull is taken over the projected embeddings (pre-ReLU) of the words that can stand at each
  output place, then shrunk towards the projection of the original window token by ``eps``.
  Positions where nothing matches get the anchor point (finite; the DP masks them out).
  """
  n_pad = plan.token_ids.shape[1]
  out = []
  for t, tp in zip(space.transformations, plan.transformations):
    if t.t == 0:
      out.append(None)
      continue
    candidates = model.projection.pre_activation(model.embed(tp.replacement_ids))
    offsets = jnp.asarray(_anchor_offsets(t.s, t.t))
    anchor_pos = jnp.clip(jnp.arange(n_pad)[:, None] - t.s + 1 + offsets[None, :], 0, n_pad - 1)
    anchor = model.projection.pre_activation(model.embed(plan.token_ids[:, anchor_pos]))
    box = iv.hull(candidates, tp.replacement_mask, axis=3, empty=anchor)
    box = iv.shrink_towards(box, anchor, eps)
    out.append(cell.input_gates(iv.monotone(jax.nn.relu, box)))
  return out


def _grid_broadcast(x: jax.Array, grid_rank: int) -> jax.Array:
  """(B, F) → (B, 1, …, 1, F) to broadcast over the decomposition grid."""
  return x.reshape(x.shape[:1] + (1,) * grid_rank + x.shape[1:])


def _shift_in(x: jax.Array, axis: int) -> jax.Array:
  """Moves slots c − e_k to c along ``axis``: drops the last slot and pads one in front."""
  pad = [(0, 0)] * x.ndim
  pad[axis] = (1, 0)
  return jnp.pad(jax.lax.slice_in_dim(x, 0, x.shape[axis] - 1, axis=axis), pad)


def memoizing_scan(cell: LSTMCell, space: Space, point_gates: jax.Array,
                   repl_gates: list[iv.Interval | None], matches: list[jax.Array],
                   lengths: jax.Array, track_sums: bool):
  """Runs the DP over all positions for one direction.

  Args:
    cell: the LSTM cell.
    space: gives s_k, t_k, δ_k (static).
    point_gates: (B, N, 4H) input gates of the original tokens.
    repl_gates: per k, Interval (B, N, t_k, 4H) or None for t_k = 0.
    matches: per k, bool (B, N): φ_k holds for the window ending at j.
    lengths: (B,).
    track_sums: also carry, per slot, the box of the sum of h over the emitted positions
      (for mean pooling).

  Returns:
    (state, valid, sums): the final H[n, ·] as an Interval pair (h, c) of shape
    (B, δ_1+1, …, δ_m+1, H), its validity (B, δ_1+1, …), and the sums box (or None).
  """
  batch, n_pad, _ = point_gates.shape
  dims = tuple(d + 1 for d in space.budgets)
  rank = len(dims)
  window = max([t.s for t in space.transformations], default=1)
  hidden = cell.hidden
  zeros = jnp.zeros((window, batch) + dims + (hidden,), point_gates.dtype)
  valid0 = jnp.zeros((window, batch) + dims, bool).at[(0, slice(None)) + (0,) * rank].set(True)
  box0 = iv.point(zeros)
  carry0 = ((box0, box0), valid0, box0 if track_sums else None)

  time_major = lambda a: jnp.swapaxes(a, 0, 1)
  xs = (time_major(point_gates), time_major(jnp.arange(n_pad)[None, :] < lengths[:, None]),
        [time_major(m) for m in matches],
        [None if g is None else jax.tree.map(time_major, g) for g in repl_gates])

  def body(carry, x):
    (hs, cs), valid, sums = carry
    gates, real, match_j, repl_j = x
    state = cell.step((hs[0], cs[0]), _grid_broadcast(gates, rank))
    ok = valid[0]
    total = iv.add(sums[0], state[0]) if track_sums else None
    for k, t in enumerate(space.transformations):
      if space.budgets[k] == 0:
        continue
      axis = 1 + k
      src = (hs[t.s - 1], cs[t.s - 1])
      cand_ok = valid[t.s - 1] & _grid_broadcast(match_j[k], rank)
      cand_sum = sums[t.s - 1] if track_sums else None
      for l in range(t.t):
        src = cell.step(src, _grid_broadcast(repl_j[k][:, l], rank))
        cand_sum = iv.add(cand_sum, src[0]) if track_sums else None
      shift = lambda a: _shift_in(a, axis)
      src = jax.tree.map(shift, src)
      cand_ok = shift(cand_ok)
      h_new, _ = iv.masked_join(state[0], ok, src[0], cand_ok)
      c_new, _ = iv.masked_join(state[1], ok, src[1], cand_ok)
      if track_sums:
        total, _ = iv.masked_join(total, ok, jax.tree.map(shift, cand_sum), cand_ok)
      state, ok = (h_new, c_new), ok | cand_ok
    keep = _grid_broadcast(real, rank)
    state = tuple(iv.where(keep[..., None], a, b) for a, b in zip(state, (hs[0], cs[0])))
    ok = jnp.where(keep, ok, valid[0])
    push = lambda new, old: jax.tree.map(lambda a, b: jnp.concatenate([a[None], b[:-1]]), new, old)
    new_carry = ((push(state[0], hs), push(state[1], cs)), push(ok, valid), None)
    if track_sums:
      total = iv.where(keep[..., None], total, sums[0])
      new_carry = new_carry[:2] + (push(total, sums),)
    return new_carry, None

  ((hs, cs), valid, sums), _ = jax.lax.scan(body, carry0, xs)
  return (hs[0], cs[0]), valid[0], (sums[0] if track_sums else None)


def _join_slots(box: iv.Interval, valid: jax.Array) -> iv.Interval:
  """Join over the decomposition grid of the valid slots: (B, *dims, H) → (B, H)."""
  batch, hidden = box.shape[0], box.shape[-1]
  lo = jnp.where(valid[..., None], box.lo, jnp.inf).reshape(batch, -1, hidden)
  hi = jnp.where(valid[..., None], box.hi, -jnp.inf).reshape(batch, -1, hidden)
  return iv.Interval(lo.min(axis=1), hi.max(axis=1))


def _origin(x: jax.Array, rank: int) -> jax.Array:
  """Slot c = 0 of a grid array (B, *dims, H): the unperturbed sentence."""
  return x[(slice(None),) + (0,) * rank]


def _slot_lengths(space: Space, lengths: jax.Array) -> jax.Array:
  """Output length of every slot, n + Σ_k c_k (t_k − s_k), at least 1: (B, *dims)."""
  growth = space.decomposition() @ np.asarray([t.t - t.s for t in space.transformations], np.int32)
  grid = jnp.asarray(growth.reshape(tuple(d + 1 for d in space.budgets)))
  return jnp.maximum(lengths.reshape((-1,) + (1,) * grid.ndim) + grid[None], 1)


def certified_features(model: LSTMClassifier, space: Space, plan: Plan, eps: jax.Array
                       ) -> tuple[iv.Interval, jax.Array]:
  """Boxes of the pooled features over S(x), and the features of x itself.

  Returns:
    (box, clean): Interval (B, H_in) and array (B, H_in), H_in = hidden · (2 if bidirectional).
  """
  directions = [(model.forward_cell, plan, space)]
  if model.bidirectional:
    directions.append((model.backward_cell, reverse_plan(plan, space), space.reversed()))
  rank = len(space.budgets)
  boxes, cleans = [], []
  for cell, p, s in directions:
    z = model.projection(model.embed(p.token_ids))
    (h, _), valid, sums = memoizing_scan(
        cell, s, cell.input_gates(z), replacement_gates(model, cell, p, s, eps),
        [tp.match for tp in p.transformations], p.lengths, track_sums=model.pooling == "mean")
    if model.pooling == "mean":
      h = iv.scale(sums, 1.0 / _slot_lengths(s, p.lengths)[..., None].astype(z.dtype))
    boxes.append(_join_slots(h, valid))
    cleans.append(_origin(h.lo, rank))
  box = iv.Interval(jnp.concatenate([b.lo for b in boxes], -1),
                    jnp.concatenate([b.hi for b in boxes], -1))
  return box, jnp.concatenate(cleans, -1)
