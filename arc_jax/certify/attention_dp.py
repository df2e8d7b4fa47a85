"""Certifying attention pooling: the states of S(x) at every output position (paper appendix
"Handling Attention", its G_{i,j}^S; docs/ALGORITHM.md §5).

Attention reads every hidden state, so the final-state DP (:mod:`arc_jax.certify.lstm_dp`) is not
enough: for every string z of S(x) and every position p of z we need a box holding h_p(z). The
positions of a string are reached in three ways, and the scan here emits all three at step j
(original token x_j consumed), for every decomposition slot c of the prefix at once:

* a *complete* state H[j, c] (x_j kept, or a rewrite of a window ending at j finished): its
  output position is p = j + g(c), g(c) = Σ_k c_k (t_k − s_k);
* a state *in the middle of* a rewrite of T_k of the window ending at j, after its first l < t_k
  output tokens, from the source H[j − s_k, c − e_k]: position p = j + g(c) − (t_k − l). These are
  the states the appendix's ``swap`` example shows the final-state sets miss.

Each emission is at p = j + o(c) with an offset o(c) fixed by the signature, so re-indexing from
(j, c) to (p, c) is a static gather after the scan, not work inside it.

A string of the final slot C (exactly C_k applications in all) has at position p a prefix with
c ≤ C applications so far, emitted at some step j, whose rest x_{j+1..n} takes exactly d = C − c
applications. So, with F[j, d] = "the suffix after j can take exactly d" (the same reachability
recurrence run on the reversed sentence),

    box(C, p) = ⊔_{c + d = C} ⊔_{emissions e at (p, c) from step j with F[j, d]}  e.

Soundness: every string's state at p is one of the joined emissions (the three cases above are
exhaustive: position p is either the last token of a kept token or of a finished rewrite, or an
inner token of a rewrite), each emission box is sound by the induction of the final-state DP
(same cell steps, same replacement boxes), and the suffix condition only drops prefixes that no
string of slot C extends. Every string of slot C has exactly L_C = n + g(C) positions, so the
attention of slot C is a softmax over exactly those positions, bounded by
:func:`arc_jax.interval.softmax_weighted_sum`; the features are the join over the reachable C.

Bi-LSTM: the same DP on the reversed sentence under the reversed space gives box_R(C, q) for the
reversed position q; the string's position p is q = L_C − 1 − p, so the concatenated state at p
lies in box(C, p) × box_R(C, L_C − 1 − p).
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np

from arc_jax import interval as iv
from arc_jax.certify.lstm_dp import replacement_gates, word_pre_activations
from arc_jax.domain import Domain, concatenate
from arc_jax.nn.models import LSTMClassifier
from arc_jax.nn.recurrent import RecurrentCell, initial_carry
from arc_jax.perturbation.plans import Plan, reverse_plan
from arc_jax.perturbation.spaces import Signature


def _grid(x: jax.Array, rank: int) -> jax.Array:
  """(B, …) → (B, 1, …, 1, …) to broadcast over the decomposition grid."""
  return x.reshape(x.shape[:1] + (1,) * rank + x.shape[1:])


def _sources(x, axis: int):
  """Slots c − e_k of every slot c with c_k ≥ 1: all but the last slot along the grid axis."""
  return jax.tree.map(lambda a: jax.lax.slice_in_dim(a, 0, a.shape[axis] - 1, axis=axis), x)


def _land(x, axis: int):
  """Puts results computed from the slots c − e_k into the slots c (a zero / ⊥ slot in front)."""
  def pad(a):
    widths = [(0, 0)] * a.ndim
    widths[axis] = (1, 0)
    return jnp.pad(a, widths)
  return jax.tree.map(pad, x)


def _active(sig: Signature) -> list[int]:
  return [k for k, budget in enumerate(sig.budgets) if budget > 0]


def reachable_slots(sig: Signature, matches: list[jax.Array], lengths: jax.Array,
                    n_pad: int) -> jax.Array:
  """V (N+1, B, *grid): V[m, b, c] iff some string is made from the first m tokens of row b by
  exactly c_k applications of each T_k (the validity of the final-state DP; V[m] = V[n] past n).

  Args:
    matches: per k, bool (B, N): φ_k holds for the window ending at position j.
    lengths: (B,).
  """
  rank = len(sig.grid)
  window = max(sig.s, default=1)
  batch = lengths.shape[0]
  start = jnp.zeros((window, batch) + sig.grid, bool).at[(0, slice(None)) + (0,) * rank].set(True)
  real = jnp.arange(n_pad)[:, None] < lengths[None, :]

  def body(valid, x):
    real_j, match_j = x
    new = valid[0]
    for k in _active(sig):
      axis = 1 + k
      new = new | _land(_sources(valid[sig.s[k] - 1], axis) & _grid(match_j[k], rank), axis)
    new = jnp.where(_grid(real_j, rank), new, valid[0])
    return jnp.concatenate([new[None], valid[:-1]]), new

  _, steps = jax.lax.scan(body, start, (real, [jnp.swapaxes(m, 0, 1) for m in matches]))
  return jnp.concatenate([start[:1], steps])


def _step_together(cell: RecurrentCell, inputs, domain: Domain):
  """One cell step for several (carry, gates) pairs in one call: carries whose values have shape
  (B, *g_i, H) (each its own grid g_i), gates (B, G); returns the new carries."""
  shapes = [carry[0].shape for carry, _ in inputs]
  rows = [int(np.prod(shape[1:-1])) for shape in shapes]
  flat = lambda a, r: a.reshape(a.shape[0], r, a.shape[-1])
  cat = lambda parts: concatenate(parts, axis=1)
  carry = tuple(cat([flat(value, r) for value, r in zip(values, rows)])
                for values in zip(*(carry for carry, _ in inputs)))
  gates = cat([jax.tree.map(lambda a: jnp.broadcast_to(a[:, None], (a.shape[0], r, a.shape[-1])),
                            g) for (_, g), r in zip(inputs, rows)])
  carry = cell.step(carry, gates, domain=domain)
  bounds = np.cumsum([0] + rows)
  return [jax.tree.map(lambda x: x[:, a:b].reshape(shape), carry)
          for a, b, shape in zip(bounds[:-1], bounds[1:], shapes)]


def emission_offsets(sig: Signature) -> list[np.ndarray]:
  """Output position minus step, o(c) on the grid, of each emission of :func:`positional_scan`:
  the complete states first, then the middle states (k, l) for each k and l = 1..t_k − 1."""
  growth = (sig.decomposition() @ (np.asarray(sig.t, int) - np.asarray(sig.s, int))).reshape(
      sig.grid)
  return [growth] + [growth - (sig.t[k] - l) for k in _active(sig) for l in range(1, sig.t[k])]


def positional_scan(cell: RecurrentCell, sig: Signature, point_gates: iv.Value,
                    repl_gates: list[iv.Value | None], matches: list[jax.Array],
                    lengths: jax.Array, valid: jax.Array, domain: Domain = iv.SOUND
                    ) -> list[tuple[iv.Value, jax.Array]]:
  """The DP over the positions of one direction, emitting every state it computes.

  Args:
    cell: the recurrent cell.
    sig: the space's signature (static).
    point_gates: (B, N, G), input gates of the original tokens (boxes a few rounding errors
      wide in the sound interval domain, as in the final-state DP).
    repl_gates: per k, (B, N, t_k, G) of the replacement places, or None (t_k = 0, repetitions).
    matches: per k, bool (B, N).
    lengths: (B,).
    valid: (N+1, B, *grid) from :func:`reachable_slots`.
    domain: the abstract domain of the states (static).

  Returns:
    per emission (in the order of :func:`emission_offsets`), the h boxes (N, B, *grid, H)
    emitted at each step and their validity (N, B, *grid).
  """
  batch, n_pad, _ = point_gates.shape
  rank = len(sig.grid)
  active = _active(sig)
  window = max(sig.s, default=1)
  d = domain
  zeros = d.lift(jnp.zeros((window, batch) + sig.grid + (cell.hidden,), point_gates.dtype))
  carry0 = initial_carry(cell, zeros)  # each carried value holds a window of H[j − i]
  padded = jnp.concatenate([jnp.zeros((window - 1,) + valid.shape[1:], bool), valid])
  before = lambda s: padded[window - s:window - s + n_pad]  # V[j + 1 − s] at step j
  time_major = lambda a: jnp.swapaxes(a, 0, 1)
  xs = (jax.tree.map(time_major, point_gates),
        jnp.arange(n_pad)[:, None] < lengths[None, :], before(1),
        [before(s) for s in sig.s], [time_major(m) for m in matches],
        [None if g is None else jax.tree.map(time_major, g) for g in repl_gates])

  def body(states, x):
    last = tuple(a[0] for a in states)  # H[j − 1]
    gates, real, keep_ok, src_valid, match_j, repl_j = x
    real = _grid(real, rank)
    ok = {k: _sources(src_valid[k], 1 + k) & _grid(match_j[k], rank) for k in active}
    sources = {k: _sources(tuple(a[sig.s[k] - 1] for a in states), 1 + k) for k in active}
    # Round 1: keep x_j, and the first output token of every rewrite that is not a repetition.
    firsts = [k for k in active if sig.t[k] and not sig.repeats[k]]
    out = _step_together(cell, [(last, gates)]
                         + [(sources[k], repl_j[k][:, 0]) for k in firsts], d)
    kept, rewrites = out[0], dict(zip(firsts, out[1:]))
    for k in active:
      if sig.t[k] == 0:
        rewrites[k] = sources[k]  # a deletion
      elif sig.repeats[k]:  # (x_j, x_j, …): the first copy is the keep step from slots c − e_k
        rewrites[k] = _sources(kept, 1 + k)
    middles = []
    for l in range(1, max(sig.t, default=0)):
      going = [k for k in active if sig.t[k] > l]
      if not going:  # the long rewrites have budget 0 on this (reachable) grid
        break
      middles += [(k, _land(rewrites[k][0], 1 + k)) for k in going]
      rewrites.update(zip(going, _step_together(
          cell, [(rewrites[k], gates if sig.repeats[k] else repl_j[k][:, l]) for k in going], d)))
    carry, done = kept, keep_ok
    for k in active:
      new, new_ok = _land(rewrites[k], 1 + k), _land(ok[k], 1 + k)
      carry = tuple(d.masked_join(a, done, b, new_ok)[0] for a, b in zip(carry, new))
      done = done | new_ok
    carry = tuple(d.where(real[..., None], a, b) for a, b in zip(carry, last))
    push = lambda new, old: jax.tree.map(lambda a, b: jnp.concatenate([a[None], b[:-1]]), new, old)
    emitted = [(carry[0], done & real)] + sorted_middles(middles, ok, real)
    return tuple(map(push, carry, states)), emitted

  def sorted_middles(middles, ok, real):
    """In the order of :func:`emission_offsets`: by k, then l."""
    by_k = {}
    for k, box in middles:
      by_k.setdefault(k, []).append((box, _land(ok[k], 1 + k) & real))
    return [e for k in active for e in by_k.get(k, [])]

  # Rematerialise the body in the backward pass, as the final-state DP does.
  _, emitted = jax.lax.scan(jax.checkpoint(body), carry0, xs)
  return emitted


def _differences(sig: Signature) -> tuple[np.ndarray, np.ndarray]:
  """For flat slots C and c: whether c ≤ C, and the flat slot C − c (0 where c ≰ C); (G, G)."""
  slots = sig.decomposition()
  below = np.all(slots[None, :] <= slots[:, None], axis=-1)
  index = {tuple(c): i for i, c in enumerate(slots)}
  difference = np.zeros(below.shape, int)
  for big, small in zip(*np.nonzero(below)):
    difference[big, small] = index[tuple(slots[big] - slots[small])]
  return below, difference


def states_by_slot(sig: Signature, emitted, suffix_ok: jax.Array, n_positions: int,
                   domain: Domain = iv.SOUND) -> tuple[iv.Value, jax.Array]:
  """Boxes of the state at every output position p of every final slot C (module docstring).

  Args:
    emitted: the output of :func:`positional_scan`, grids flattened: (N, B, G, H) and (N, B, G).
    suffix_ok: (N+1, B, G): ``suffix_ok[m, b, d]`` iff x_m..x_{n−1} of row b takes exactly d.
    n_positions: P, the number of output positions to fill.

  Returns:
    (box, present): (P, G, B, H) and (P, G, B); ``present`` is False where nothing reaches
    (C, p) (a position beyond L_C, or an unreachable slot; the box is the domain's ⊥ there).
  """
  n_pad = emitted[0][1].shape[0]
  below, difference = _differences(sig)
  size = below.shape[0]
  slots = np.arange(size)
  box = present = None
  for (emission, valid), offset in zip(emitted, emission_offsets(sig)):
    # The emission at (p, c) comes from step j = p − o(c): gather it once per prefix slot c, then
    # join it into every final slot C ≥ c whose rest C − c the suffix after j can take.
    step = np.arange(n_positions)[:, None] - offset.reshape(-1)[None]  # (P, G)
    inside = (step >= 0) & (step < n_pad)
    step = np.clip(step, 0, n_pad - 1)
    at = lambda a: a[step, :, slots[None]]  # (N, B, G, …) → (P, G, B, …)
    rests = jnp.swapaxes(suffix_ok[step + 1], -1, -2)  # (P, G_c, G_d, B)
    ok = ((inside[..., None] & at(valid))[:, None]  # (P, G_C, G_c, B)
          & rests[:, slots[None, :], difference] & below[None, :, :, None])
    candidates = jax.tree.map(lambda a: at(a)[:, None], emission)  # (P, 1, G_c, B, H)
    e_box, e_present = domain.hull(candidates, ok, axis=2), ok.any(axis=2)
    if box is None:
      box, present = e_box, e_present
    else:
      box, present = domain.join(box, e_box), present | e_present
  return box, present


def slot_states(model: LSTMClassifier, sig: Signature, plan: Plan, eps: jax.Array,
                domain: Domain = iv.SOUND) -> tuple[iv.Value, jax.Array, jax.Array]:
  """Boxes of the (concatenated) states at every position of the strings of every final slot.

  Returns:
    (box, mask, reachable): (B, G, P, H_in) in ``domain`` (box[b, C, p] holds the state at
    position p of every string of row b with exactly C_k applications of each T_k; finite zeros
    where ``mask`` is False), mask (B, G, P) (p < L_C and slot C reachable) and reachable (B, G).
    Slots are flat, in the order of ``sig.decomposition()``.
  """
  sig = sig.signature
  plan = jax.tree.map(jnp.asarray, plan)
  batch, n_pad = plan.token_ids.shape
  size = int(np.prod(sig.grid))
  plans = [plan, reverse_plan(plan, sig)]
  valid = [reachable_slots(sig, [tp.match for tp in p.transformations], p.lengths, n_pad)
           for p in plans]
  # The suffix after position m of a sentence is the reversed sentence's prefix of length n − m.
  m = jnp.clip(plan.lengths[None, :] - jnp.arange(n_pad + 1)[:, None], 0, n_pad)  # (N+1, B)
  flat = lambda v: v.reshape(v.shape[:2] + (size,))
  suffix_ok = [flat(jnp.take_along_axis(v, m.reshape(m.shape + (1,) * len(sig.grid)), axis=0))
               for v in reversed(valid)]
  growth = emission_offsets(sig)[0].reshape(-1)
  n_positions = n_pad + max(int(growth.max()), 0)
  out_lengths = plan.lengths[None, :] + jnp.asarray(growth)[:, None]  # (G, B)
  positions = jnp.arange(n_positions)[:, None, None]
  words = word_pre_activations(model, plan, sig, domain)  # the reversed plan holds the same ids
  directions = []
  for cell, p, v, ok in zip(model.cells, plans, valid, suffix_ok):
    z = domain.monotone(jax.nn.relu, words(p.token_ids))  # every rounding
    gates = cell.input_gates(z, domain)
    if domain.exact_on_points:  # a plain array (lift_input); the scan steps it beside boxes
      gates = domain.lift(gates)
    emitted = positional_scan(cell, sig, gates,
                              replacement_gates(model, cell, p, sig, eps, domain, words),
                              [tp.match for tp in p.transformations], p.lengths, v, domain)
    unflat = lambda a: a.reshape(a.shape[:2] + (size, a.shape[-1]))
    emitted = [(jax.tree.map(unflat, box), flat(ok_)) for box, ok_ in emitted]
    directions.append(states_by_slot(sig, emitted, ok, n_positions, domain))
  (box, present), *backward = directions
  if backward:  # position p of a string of slot C is its reversed position L_C − 1 − p
    (back, back_present), = backward
    mirror = jnp.clip(out_lengths[None] - 1 - positions, 0, n_positions - 1)  # (P, G, B)
    back = jax.tree.map(lambda a: jnp.take_along_axis(a, mirror[..., None], axis=0), back)
    present = present & jnp.take_along_axis(back_present, mirror, axis=0)
    box = concatenate([box, back])
  reachable = valid[0][-1].reshape(batch, size)  # slot C holds some string of S(x)
  in_string = (positions < out_lengths[None]) & reachable.T[None]  # (P, G, B)
  chex.assert_equal_shape([in_string, present])
  # (P, G, B, H) → (B, G, P, H); positions outside the strings get finite zeros (masked out). A
  # position inside a string always has emissions (module docstring); were one missing, its
  # empty box (+inf, −inf) would stay and show in every soundness test.
  layout = lambda a: jnp.transpose(jnp.where(in_string[..., None], a, 0.0), (2, 1, 0, 3))
  return jax.tree.map(layout, box), jnp.transpose(in_string, (2, 1, 0)), reachable


def attention_features(model: LSTMClassifier, sig: Signature, plan: Plan, eps: jax.Array,
                       domain: Domain = iv.SOUND) -> tuple[iv.Value, jax.Array]:
  """Boxes of the attention-pooled features over S(x), and the features of x itself: the
  counterpart of :func:`arc_jax.certify.lstm_dp.certified_features` for ``pooling="attention"``.

  Returns:
    (box, clean): (B, H_in) in ``domain`` and array (B, H_in).
  """
  box, mask, reachable = slot_states(model, sig, plan, eps, domain)
  # (B, G, H_in): one softmax per slot, over its L_C positions; then the join over the slots.
  pooled = model.attend(box, mask, domain)
  joined = domain.hull(pooled, reachable, axis=1)
  if not domain.exact_on_points:  # slot 0 is x's box, not x's point: see Domain.exact_on_points
    return joined, model.features(plan.token_ids, plan.lengths)
  origin = jax.tree.map(lambda a: a[:, 0], box)  # slot 0 is x alone
  clean = model.attend(domain.representative(origin), mask[:, 0])
  return joined, clean

