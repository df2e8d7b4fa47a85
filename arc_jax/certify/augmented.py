"""Certifying an abstracted space on top of members of an augmented space (ARC-A3T, A3T).

For a split S = S_aug ∪ S_abs (:mod:`arc_jax.perturbation.split`) and members x'_1..x'_M of
S_aug(x), every string of ⋃_m S_abs|x'_m(x'_m) has logits inside the join of the members'
certificates, where S_abs|x' may only rewrite the windows of x' that the augmented rewrites left
untouched. When the members are all of S_aug(x), that union is S(x) itself, so the example is
certified for S iff every member is certified for its restricted S_abs.

Two abstractions of S_abs|x':

* ``"dp"`` (ARC-A3T): the ARC DP (:func:`arc_jax.certify.certify_model`) on a plan of x' whose
  matches are cleared at the windows that are not free (:func:`member_plan`). The DP only reads
  where each transformation matches and what it writes, so this is the DP of the restricted
  space; its soundness argument (docs/ALGORITHM.md §2) is unchanged.
* ``"interval"`` (A3T, Zhang et al. 2020): for 1→1 transformations (Sub) only, one box per
  position, the hull of the original token and every replacement at its free windows, pushed
  through the interval LSTM with a single state (:func:`interval_features`). It ignores the
  budgets δ, which makes it sound for every δ (it contains every string that rewrites any subset
  of the positions) and looser than the DP.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Mapping, Sequence

import chex
import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from arc_jax import interval as iv
from arc_jax.certify.api import (Certificate, certificate_from_features, certify_model, check_state,
                                 check_vocab)
from arc_jax.certify.lstm_dp import replacement_gates
from arc_jax.domain import Domain
from arc_jax.nn.cells import LSTMCell
from arc_jax.nn.models import LSTMClassifier
from arc_jax.perturbation.plans import Plan, PlanBuilder, reverse_plan
from arc_jax.perturbation.spaces import Signature, Space
from arc_jax.perturbation.split import Member, SplitSpace


def member_plan(builder: PlanBuilder, members: Sequence[Member], batch_size: int | None = None
                ) -> Plan:
  """The DP plan of ``members`` under ``builder.space`` (S_abs) restricted to their free windows.

  Row b is ``members[b].tokens``; a transformation matches at the window ending at j only where
  it matches in x' *and* the window is free (:meth:`Member.free_windows`).
  """
  plan = builder.build([m.tokens for m in members], batch_size)
  out = []
  for t, tp in zip(builder.space.transformations, plan.transformations):
    free = np.zeros_like(tp.match)
    for b, m in enumerate(members):
      starts = np.flatnonzero(m.free_windows(t.s))
      free[b, starts + t.s - 1] = True
    out.append(dataclasses.replace(tp, match=tp.match & free))
  return dataclasses.replace(plan, transformations=tuple(out))


def check_interval_space(space: Space | Signature) -> None:
  """Raises ValueError unless every transformation is 1→1 (what A3T's intervals abstract)."""
  sig = space.signature
  if any(s != 1 or t != 1 for s, t in zip(sig.s, sig.t)):
    raise ValueError("The interval abstraction covers 1→1 transformations (Sub) only; abstract "
                     "the others with the DP (ARC-A3T) or augment them.")


def _interval_run(cell: LSTMCell, gates: iv.Value, lengths: jax.Array, domain: Domain
                  ) -> tuple[iv.Value, iv.Value, iv.Value]:
  """The interval LSTM over per-position gate boxes (B, N, 4H): boxes of the final state (B, H),
  of the sum of the states (B, H) and of the state at every position (B, N, H), the run that
  :meth:`LSTMClassifier.pool` pools.

  Soundness: each step is the sound interval cell on boxes containing every concrete input and
  state; padded positions keep the state (as the concrete ``LSTMClassifier._run``).
  """
  d = domain
  batch, n_pad, _ = gates.shape
  zeros = d.lift(jnp.zeros((batch, cell.hidden), gates.dtype))
  time_major = lambda a: jnp.swapaxes(a, 0, 1)
  real = time_major(jnp.arange(n_pad)[None, :] < lengths[:, None])[..., None]

  def body(carry, inputs):
    state, total = carry
    g, r = inputs
    new = cell.step(state, g, domain=d)
    state = tuple(d.where(r, a, b) for a, b in zip(new, state))
    return (state, d.where(r, d.add(total, state[0]), total)), state[0]

  ((h, _), total), states = jax.lax.scan(body, ((zeros, zeros), zeros),
                                         (jax.tree.map(time_major, gates), real))
  return h, total, jax.tree.map(time_major, states)


def interval_features(model: LSTMClassifier, space: Space | Signature, plan: Plan,
                      eps: jax.Array, domain: Domain = iv.SOUND) -> tuple[iv.Value, jax.Array]:
  """A3T's interval abstraction: (box (B, H_in), clean features (B, H_in)).

  At each position the input-gate box is the join of the original token's gates and, for every
  transformation matching there, the hull of its replacements' gates (shrunk towards the
  original by ``eps``, as the DP's); the same boxes reversed feed the backward LSTM.
  """
  sig = space.signature
  check_interval_space(sig)
  plan = jax.tree.map(jnp.asarray, plan)
  runs = []
  for direction, cell in enumerate(model.cells):
    p = plan if direction == 0 else reverse_plan(plan, sig)
    box = domain.lift(cell.input_gates(model.projection(model.embed(p.token_ids))))
    for gates, tp in zip(replacement_gates(model, cell, p, sig, eps, domain), p.transformations):
      if gates is None:  # a 1→1 repetition writes the token itself: the box holds it already
        continue
      first = jax.tree.map(lambda a: a[:, :, 0], gates)
      box = domain.where(tp.match[..., None], domain.join(box, first), box)
    runs.append(_interval_run(cell, box, p.lengths, domain))
  return model.pool(runs, plan.lengths, domain), model.features(plan.token_ids, plan.lengths)


def certify_intervals(model: LSTMClassifier, space: Space | Signature, plan: Plan,
                      labels: jax.Array, eps: jax.Array | float = 1.0,
                      dropout_key: jax.Array | None = None, domain: Domain = iv.SOUND
                      ) -> Certificate:
  """:func:`arc_jax.certify.certify_model` with A3T's interval abstraction instead of the DP."""
  chex.assert_rank(plan.token_ids, 2)
  chex.assert_shape(labels, (plan.token_ids.shape[0],))
  eps = jnp.asarray(eps, model.embeddings[...].dtype)
  box, clean = interval_features(model, space, plan, eps, domain)
  return certificate_from_features(model, box, clean, labels, dropout_key, domain)


ABSTRACTIONS = {"dp": certify_model, "interval": certify_intervals}
"""How S_abs|x' is abstracted: name → ``certify(model, space, plan, labels, eps, dropout_key,
domain)``."""


def worst_margins(margins: jax.Array, members: int) -> jax.Array:
  """Per example, the lower bounds of z_y − z_j over all its members' sets: rows (B·M, K) laid
  out example-major (row b·M + m is member m of example b) → (B, K)."""
  return margins.reshape(-1, members, margins.shape[-1]).min(axis=1)


def certify_split(model: LSTMClassifier, split: SplitSpace, sentences: Sequence[Sequence[str]],
                  labels: Sequence[int], vocab: Mapping[str, int], *, abstraction: str = "dp",
                  batch_size: int = 32) -> dict[str, np.ndarray]:
  """Certifies raw token lists under a split space by certifying every member of S_aug(x).

  The members are enumerated (:meth:`SplitSpace.members`) and certified in jitted batches;
  an example is certified iff all of its members are, which proves robustness on all of S(x).

  Returns:
    dict of numpy arrays in the input order: ``certified`` (n,), ``margins`` (n, K) (lower
    bounds of z_y − z_j over S(x), the minimum over the members) and ``members`` (n,).
  """
  if not isinstance(model, LSTMClassifier):
    raise ValueError(f"certify_split certifies LSTMs and Bi-LSTMs, not {type(model).__name__}.")
  if not isinstance(split, SplitSpace):
    raise ValueError(f"split is {type(split).__name__} {str(split)[:60]!r}, not a split space: "
                     "pass arc_jax.perturbation.split.split_space(space, 'Sub').")
  check_state(model)
  check_vocab(vocab, model.embeddings[...].shape[0])
  abstract = split.abstract.restricted_to(vocab)
  split = SplitSpace(split.space.restricted_to(vocab), split.abstracted)
  builder = PlanBuilder(abstract, vocab)
  graphdef, state = nnx.split(model)
  certify_jit = _certify_jit(ABSTRACTIONS[abstraction])
  rows = [(i, m) for i, x in enumerate(sentences) for m in split.members(x)]
  owners = np.array([i for i, _ in rows], np.int64)
  margins = np.full((len(sentences), model.num_classes), np.inf)
  for start in range(0, len(rows), batch_size):
    chunk = rows[start:start + batch_size]
    y = np.zeros((batch_size,), np.int32)
    y[:len(chunk)] = [labels[i] for i, _ in chunk]
    plan = member_plan(builder, [m for _, m in chunk], batch_size)
    cert = certify_jit(graphdef, abstract.signature, state, plan, y)
    np.minimum.at(margins, owners[start:start + len(chunk)],
                  np.asarray(cert.margins)[:len(chunk)])
  others = np.arange(model.num_classes)[None, :] != np.asarray(labels)[:, None]
  return {"certified": np.all(np.where(others, margins > 0, True), axis=1), "margins": margins,
          "members": np.bincount(owners, minlength=len(sentences))}


@functools.cache
def _certify_jit(certify_fn):
  """``jit(certify(nnx.merge(graphdef, state), signature, plan, labels))``, one per abstraction."""
  return jax.jit(lambda graphdef, signature, state, plan, labels: certify_fn(
      nnx.merge(graphdef, state), signature, plan, labels), static_argnums=(0, 1))
