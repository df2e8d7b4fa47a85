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
from arc_jax.certify.api import (MAX_GRID_SLOTS, Certificate, CertifyResult, certify_batches,
                                 certify_jit, certify_model, check_grid, check_sentences,
                                 check_state, check_vocab, padded_labels)
from arc_jax.certify.lstm_dp import replacement_gates
from arc_jax.certify.sequence import certificate_from_features, certification_order
from arc_jax.domain import Domain
from arc_jax.nn import recurrent
from arc_jax.nn.models import LSTMClassifier
from arc_jax.perturbation.plans import Plan, PlanBuilder, reachable_signature, reverse_plan
from arc_jax.perturbation.shapes import MAX_DP_SHAPES
from arc_jax.perturbation.spaces import Signature, Space
from arc_jax.perturbation.split import Member, SplitSpace
from arc_jax.xla_options import COMPILER_OPTIONS


def free_windows_only(plan: Plan, space: Space | Signature, members: Sequence[Member]) -> Plan:
  """``plan`` of the strings of ``members`` (row b: ``members[b].tokens``, lowered under S_abs,
  ``space``) with each transformation matching at the window ending at j only where that window
  is free in its member (:meth:`Member.free_windows`); the plan of S_abs restricted to the free
  windows. Host-side (numpy)."""
  out = []
  for s, tp in zip(space.signature.s, plan.transformations):
    free = np.zeros_like(tp.match)
    for b, m in enumerate(members):
      starts = np.flatnonzero(m.free_windows(s))
      free[b, starts + s - 1] = True
    out.append(dataclasses.replace(tp, match=tp.match & free))
  return dataclasses.replace(plan, transformations=tuple(out))


def member_plan(builder: PlanBuilder, members: Sequence[Member], batch_size: int | None = None
                ) -> Plan:
  """The DP plan of ``members`` under ``builder.space`` (S_abs) restricted to their free windows
  (:func:`free_windows_only` of ``builder.build``, padded to ``batch_size`` rows if given)."""
  return free_windows_only(builder.build([m.tokens for m in members], batch_size),
                           builder.space, members)


def check_interval_space(space: Space | Signature) -> None:
  """Raises ValueError unless every transformation is 1→1 (what A3T's intervals abstract)."""
  sig = space.signature
  if any(s != 1 or t != 1 for s, t in zip(sig.s, sig.t)):
    raise ValueError("The interval abstraction covers 1→1 transformations (Sub) only; abstract "
                     "the others with the DP (ARC-A3T) or augment them.")


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
    runs.append(recurrent.run(cell, box, p.lengths, domain))
  return model.pool(runs, plan.lengths, domain), model.features(plan.token_ids, plan.lengths)


@functools.singledispatch
def certify_intervals(model, space: Space | Signature, plan: Plan, labels: jax.Array,
                      eps: jax.Array | float = 1.0, dropout_key: jax.Array | None = None,
                      domain: Domain = iv.SOUND) -> Certificate:
  """:func:`arc_jax.certify.certify_model` with A3T's interval abstraction instead of the DP,
  dispatched on the model's type: a model kind registers its rule with
  ``certify_intervals.register(ModelClass, rule)`` (the CNN's: ``train/families/cnn.py``)."""
  raise TypeError(f"A3T's interval abstraction has no rule for {type(model).__name__}; register "
                  "one with arc_jax.certify.augmented.certify_intervals.register.")


@certify_intervals.register
def _lstm_intervals(model: LSTMClassifier, space: Space | Signature, plan: Plan,
                    labels: jax.Array, eps: jax.Array | float = 1.0,
                    dropout_key: jax.Array | None = None, domain: Domain = iv.SOUND
                    ) -> Certificate:
  """The LSTM's: the hull of each position's 1→1 rewrites run through the cells."""
  chex.assert_rank(plan.token_ids, 2)
  chex.assert_shape(labels, (plan.token_ids.shape[0],))
  eps = jnp.asarray(eps, model.embeddings[...].dtype)
  box, clean = interval_features(model, space, plan, eps, domain)
  return certificate_from_features(model, box, clean, labels, dropout_key, domain)


ABSTRACTIONS = {"dp": certify_model, "interval": certify_intervals}
"""How S_abs|x' is abstracted: name → ``certify(model, space, plan, labels, eps, dropout_key,
domain)``."""


def _certify_intervals_state(graphdef, signature, state, plan, labels, eps=1.0, dropout_key=None,
                             *, domain=iv.SOUND):
  return certify_intervals(nnx.merge(graphdef, state), signature, plan, labels, eps, dropout_key,
                           domain)


JITTED = {"dp": certify_jit,
          "interval": jax.jit(_certify_intervals_state, static_argnums=(0, 1),
                              static_argnames="domain", compiler_options=COMPILER_OPTIONS)}
"""The jitted :data:`ABSTRACTIONS`: ``jitted(graphdef, signature, state, plan, labels, eps=1.0,
dropout_key=None, *, domain)``, cached by (graphdef, signature, domain, array shapes); the DP's
is :data:`arc_jax.certify.certify_jit`, so certify_split and certify share its programs."""


def worst_margins(margins: jax.Array, members: int) -> jax.Array:
  """Per example, the lower bounds of z_y − z_j over all its members' sets: rows (B·M, K) laid
  out example-major (row b·M + m is member m of example b) → (B, K)."""
  return margins.reshape(-1, members, margins.shape[-1]).min(axis=1)


def certify_split(model: LSTMClassifier, split: SplitSpace, sentences: Sequence[Sequence[str]],
                  labels: Sequence[int], vocab: Mapping[str, int], *, abstraction: str = "dp",
                  batch_size: int = 32, eps: float = 1.0, max_grid_slots: int = MAX_GRID_SLOTS,
                  domain: Domain = iv.SOUND, max_dp_shapes: int = MAX_DP_SHAPES
                  ) -> CertifyResult:
  """Certifies raw token lists under a split space S = S_aug ∪ S_abs (ARC-A3T, A3T) by
  certifying S_abs, restricted to each member's free windows, on every member x' of S_aug(x).

  The members are enumerated (:meth:`SplitSpace.members`, x itself first), ordered by padded
  width and reachable grid (:func:`~arc_jax.certify.sequence.certification_order`) and certified in
  jitted batches of ``batch_size`` rows, on at most ``max_dp_shapes`` (width, grid) shapes fitted
  to all the members as :func:`~arc_jax.certify.certify` fits them to sentences (0: every
  length bucket and exact grid): members of different lengths and examples share compiled
  programs, and ``certify`` shares the DP's (:data:`JITTED`); compilation dominates calls on a
  few sentences, where ``max_dp_shapes=1`` (one program) is several times faster from a cold
  start (README, "Certify your own model"). An example's certificate joins its
  members': the union of their restricted spaces is S(x) (:mod:`arc_jax.perturbation.split`),
  so its logit box is the hull of theirs and its margins the least of theirs, sound for all of
  S(x); it is certified iff every member is.

  Args:
    model: a (Bi-)LSTM classifier (every pooling).
    split: the split space (:func:`arc_jax.perturbation.split.split_space`); both parts are
      restricted to ``vocab`` first.
    sentences: n token lists; every token in ``vocab``.
    labels: int (n,).
    vocab: word → id.
    abstraction: how S_abs|x' is certified, a key of :data:`ABSTRACTIONS`: ``"dp"`` (ARC-A3T,
      the ARC DP) or ``"interval"`` (A3T's intervals, 1→1 transformations only).
    batch_size, eps, max_grid_slots, domain, max_dp_shapes: as for
      :func:`~arc_jax.certify.sequence.certify_sentences`, for the members' rows; the grid is
      S_abs's (not checked for ``"interval"``, which keeps none) and the interval abstraction has
      rules for the interval domains only.

  Returns:
    A :class:`~arc_jax.certify.certificate.CertifyResult` in the input order: ``certified``
    (n,), ``margins``, ``logits_lo``, ``logits_hi`` (n, K) over all of S(x), ``clean_logits``
    (n, K) of x itself, and ``members`` (n,), the members of S_aug(x) certified.

  Raises:
    ValueError: (one line, naming the fix) a model that is not a (Bi-)LSTM, a split that is not
      a split space, an unknown abstraction, the linear-step domain with the interval
      abstraction, a transformation that is not 1→1 abstracted by intervals, and the errors of
      :func:`~arc_jax.certify.sequence.certify_sentences` (sentences, labels, grid, parameters,
      vocabulary).
  """
  if not isinstance(model, LSTMClassifier):
    raise ValueError(f"certify_split certifies LSTMs and Bi-LSTMs, not {type(model).__name__}: "
                     "certify Tree-LSTMs under the whole space with arc_jax.certify.certify.")
  if not isinstance(split, SplitSpace):
    raise ValueError(f"split is {type(split).__name__} {str(split)[:60]!r}, not a split space: "
                     "pass arc_jax.perturbation.split.split_space(space, 'Sub').")
  if abstraction not in ABSTRACTIONS:
    raise ValueError(f"Unknown abstraction {abstraction!r}; choose one of {list(ABSTRACTIONS)}.")
  if abstraction == "interval" and domain.refines is not None:
    raise ValueError(f"The interval abstraction has rules for the interval domains only "
                     f"(arc_jax.interval.SOUND, arc_jax.interval.UNROUNDED), not "
                     f"{type(domain).__name__}: pass abstraction='dp' for that domain.")
  check_state(model)
  check_vocab(vocab, model.embeddings[...].shape[0])
  labels = check_sentences(sentences, labels, model.num_classes)
  if abstraction == "interval":
    check_interval_space(split.abstract)
  else:
    check_grid(split.abstract.signature, split.abstract, batch_size, model.hidden,
               model.embeddings[...].itemsize, max_grid_slots)
  abstract = split.abstract.restricted_to(vocab)
  split = SplitSpace(split.space.restricted_to(vocab), split.abstracted)
  members = [split.members(x) for x in sentences]
  owners = np.repeat(np.arange(len(sentences)), [len(m) for m in members])
  members = [m for found in members for m in found]
  builder = PlanBuilder(abstract, vocab)
  builder.bound_shapes([m.tokens for m in members], max_dp_shapes)
  graphdef, state = nnx.split(model)
  jitted = JITTED[abstraction]

  def lower(idx):
    chunk = [members[r] for r in idx]
    plan = builder.build([m.tokens for m in chunk], batch_size)
    # The grid of the plan before its matches are cut to the free windows: a menu entry, and
    # valid for the cut plan (dropping matches keeps a reachable grid valid).
    signature = (reachable_signature(abstract, plan, builder.shape_menu) if abstraction == "dp"
                 else abstract.signature)  # the intervals keep no grid: one program per width
    return (signature, free_windows_only(plan, abstract, chunk),
            padded_labels(labels[owners[idx]], batch_size))

  rows = certify_batches(
      certification_order(builder, [m.tokens for m in members]), batch_size, lower,
      lambda signature, plan, y: jitted(graphdef, signature, state, plan, y, eps, domain=domain))
  return joined_over_members(rows, owners, labels)


def joined_over_members(rows: CertifyResult, owners: np.ndarray, labels: np.ndarray
                        ) -> CertifyResult:
  """Per example, the certificate of the union of its members' sets, from the members'.

  Args:
    rows: one row per member, members of an example consecutive and x itself first.
    owners: int (rows,), non-decreasing: the example of each row.
    labels: int (n,).

  The logit box is the hull of the members' boxes, the margins their minimum (each member's
  bounds hold on its set, so these hold on the union); ``clean_logits`` are x's row's.
  """
  n = len(labels)

  def joined(ufunc, x, start):
    out = np.full((n,) + x.shape[1:], start, x.dtype)
    ufunc.at(out, owners, x)
    return out

  margins = joined(np.minimum, rows.margins, np.inf)
  others = np.arange(margins.shape[1])[None, :] != labels[:, None]
  return CertifyResult(np.all(np.where(others, margins > 0, True), axis=1), margins,
                       joined(np.minimum, rows.logits_lo, np.inf),
                       joined(np.maximum, rows.logits_hi, -np.inf),
                       rows.clean_logits[np.searchsorted(owners, np.arange(n))],
                       np.bincount(owners, minlength=n))
