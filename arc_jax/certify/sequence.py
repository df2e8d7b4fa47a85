"""Certification of the sentence classifiers (:class:`~arc_jax.nn.models.LSTMClassifier`: LSTMs,
Bi-LSTMs, any registered cell, final, mean or attention pooling): the features DP of each pooling
(:data:`FEATURES_DP`: the memoizing DP of :mod:`arc_jax.certify.lstm_dp`, the per-position DP of
:mod:`arc_jax.certify.attention_dp`), the head that turns its boxes into a
:class:`~arc_jax.certify.certificate.Certificate`, the batching of sentences by width and
reachable grid, and the one-call :func:`certify_sentences`.

Importing this module registers the family with the generic entry points of
:mod:`arc_jax.certify.api`: :func:`certify_sequence_model` with
:func:`~arc_jax.certify.api.certify_model` (and so :data:`~arc_jax.certify.api.certify_jit` and
:func:`~arc_jax.certify.api.make_certify_fn`), :func:`certify_sentences` with
:func:`~arc_jax.certify.api.certify`, and the size of the DP's state for
:func:`~arc_jax.certify.api.check_grid` (the package :mod:`arc_jax.certify` imports it)."""

from __future__ import annotations

from typing import Mapping, Sequence

import chex
import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from arc_jax import domains
from arc_jax import interval as iv
from arc_jax.certify import api
from arc_jax.certify.api import (MAX_GRID_SLOTS, certify, certify_batches, certify_jit,
                                 certify_model, check_grid, check_inputs, check_sentences,
                                 grid_states, padded_labels)
from arc_jax.certify.attention_dp import attention_features
from arc_jax.certify.certificate import Certificate, CertifyResult, certified_by, intersect
from arc_jax.certify.lstm_dp import certified_features
from arc_jax.domain import Domain
from arc_jax.nn.models import LSTMClassifier
from arc_jax.perturbation.plans import Plan, PlanBuilder, reachable_signature
from arc_jax.perturbation.shapes import MAX_DP_SHAPES
from arc_jax.perturbation.spaces import Signature, Space


FEATURES_DP = {"final": certified_features, "mean": certified_features,
               "attention": attention_features}
"""``model.pooling`` → the DP that bounds the pooled features over S(x): the final state and the
mean over the decomposition slots (:func:`~arc_jax.certify.lstm_dp.certified_features`), a pooling
over the states at every position over the per-position state boxes
(:func:`~arc_jax.certify.attention_dp.attention_features`). A new pooling adds its entry."""


def features_dp(pooling: str):
  """The entry of :data:`FEATURES_DP` for ``pooling``; a ValueError for a pooling without one."""
  if pooling not in FEATURES_DP:
    raise ValueError(f"No certification DP for pooling={pooling!r}; the DPs cover "
                     f"{sorted(FEATURES_DP)} (add an entry to FEATURES_DP).")
  return FEATURES_DP[pooling]


def certify_sequence_model(model: LSTMClassifier, space: Space | Signature, plan: Plan,
                           labels: jax.Array, eps: jax.Array | float = 1.0,
                           dropout_key: jax.Array | None = None,
                           domain: Domain | str = iv.SOUND) -> Certificate:
  """Certifies a batch of sentences (a :class:`Certificate` without node axis).

  Args:
    model: the classifier.
    space: the perturbation space the plan was built for (or its signature).
    plan: the batch (B, N) lowered by :class:`~arc_jax.perturbation.PlanBuilder`.
    labels: int (B,).
    eps: hull scale in [0, 1] (1 = the full space; smaller values are the training curriculum).
    dropout_key: applies the head's dropout (training); None for certification.
    domain: the abstract domain (static; or its name, :mod:`arc_jax.domains`):
      :data:`arc_jax.interval.SOUND` (default) for a certificate that holds in floating point,
      :data:`arc_jax.interval.UNROUNDED` for the cheaper surrogate bounds of training
      objectives. A domain that ``refines`` another (the
      linear-step domain refines the sound intervals) is intersected with that domain's
      certificate, so its bounds are never looser, in floating point too.
  """
  chex.assert_rank(plan.token_ids, 2)
  chex.assert_shape(labels, (plan.token_ids.shape[0],))
  domain = domains.resolve(domain)
  eps = jnp.asarray(eps, model.embeddings[...].dtype)
  box, clean = features_dp(model.pooling)(model, space.signature, plan, eps, domain)
  cert = certificate_from_features(model, box, clean, labels, dropout_key, domain)
  if domain.refines is None:
    return cert
  coarse = certify_sequence_model(model, space, plan, labels, eps, dropout_key, domain.refines)
  return intersect(cert, coarse, labels)


certify_model.register(LSTMClassifier, certify_sequence_model)


def certificate_from_features(model: LSTMClassifier, box: iv.Value, clean: jax.Array,
                              labels: jax.Array, dropout_key: jax.Array | None = None,
                              domain: Domain = iv.SOUND) -> Certificate:
  """The :class:`Certificate` of a box (B, H_in) of pooled features and the clean features.

  The head is applied to both with the same dropout masks; ``box`` may come from any sound
  abstraction of the pooled features (the DP, or A3T's intervals) in ``domain``.
  """
  hidden = model.head_activations(box, dropout_key, domain)
  hidden_clean = model.head_activations(clean, dropout_key)
  logits = domain.to_box(model.head_out(hidden, domain))
  pairs = domain.margin_lower_bounds(hidden, model.head_out.kernel[...],
                                     model.head_out.bias[...])
  rows = jnp.arange(labels.shape[0])
  margins = pairs[rows, labels].at[rows, labels].set(0.0)  # (B, K): z_y − z_j, 0 at j = y
  return Certificate(logits, model.head_out(hidden_clean), margins, certified_by(margins, labels))


def certification_order(builder: PlanBuilder, sentences: Sequence[Sequence[str]]) -> np.ndarray:
  """Indices of ``sentences`` sorted by (:meth:`PlanBuilder.grid_group`, length).

  Consecutive batches then share a padded width and mostly a reachable grid, so each runs the DP
  on the smallest grid its rows need (:func:`reachable_signature`) or the builder's shape menu
  allows.
  """
  keys = [(*builder.grid_group(s), len(s)) for s in sentences]
  return np.asarray(sorted(range(len(sentences)), key=keys.__getitem__), np.int64)


@certify.register
def certify_sentences(model: LSTMClassifier, space: Space, sentences: Sequence[Sequence[str]],
                      labels: Sequence[int], vocab: Mapping[str, int], *, batch_size: int = 32,
                      eps: float = 1.0, max_grid_slots: int = MAX_GRID_SLOTS,
                      domain: Domain | str = iv.SOUND, max_dp_shapes: int = MAX_DP_SHAPES
                      ) -> CertifyResult:
  """:func:`certify` for (Bi-)LSTMs: raw token lists.

  The space is restricted to ``vocab`` first (``Space.restricted_to``): replacements with a word
  the model has no vector for are dropped. Sentences are grouped by width and reachable grid
  (:func:`certification_order`) and certified in jitted batches, each on its reachable grid
  (:func:`reachable_signature`), with at most ``max_dp_shapes`` (width, grid) shapes fitted to
  these sentences (:mod:`arc_jax.perturbation.shapes`; 0: every length bucket and exact grid).
  The compiled functions are cached across calls (one compilation per shape, model structure
  and space signature). ``domain``: the DP's abstract domain (default the sound intervals;
  :data:`arc_jax.linear_step.LINEAR_STEP` certifies more of the models not trained for
  intervals, at a higher cost).

  Raises:
    ValueError: (one line, naming the fix) no sentences, a sentence given as a string, no labels,
      labels of the wrong length or outside the model's classes, a space given as a string or
      as a split space, a space whose decomposition grid exceeds ``max_grid_slots``, float64
      parameters while JAX's 64-bit mode is off, a vocabulary id outside the embedding table, or
      an unknown domain name (listing the registered ones).
  """
  domain = domains.resolve(domain)
  check_inputs(model, space, vocab)
  labels = check_sentences(sentences, labels, model.num_classes)
  check_grid(space.signature, space, batch_size, model.hidden, model.embeddings[...].itemsize,
             max_grid_slots)
  space = space.restricted_to(vocab)
  builder = PlanBuilder(space, vocab)
  builder.bound_shapes(sentences, max_dp_shapes)
  graphdef, state = nnx.split(model)

  def lower(idx):
    plan = builder.build([sentences[i] for i in idx], batch_size=batch_size)
    return (reachable_signature(space, plan, builder.shape_menu), plan,
            padded_labels(labels[idx], batch_size))

  return certify_batches(
      certification_order(builder, sentences), batch_size, lower,
      lambda signature, plan, y: certify_jit(graphdef, signature, state, plan, y, eps,
                                             domain=domain))


@grid_states.register
def _sequence_grid_states(sig: Signature) -> int:
  """The sequence DP keeps a window of max s_k states per slot, and a state per transformation."""
  return int(np.prod(sig.grid)) * (max(sig.s, default=1) + len(sig.s) + 1)


api.moved_here(__name__, "FEATURES_DP", "features_dp", "certify_sequence_model",
               "certificate_from_features", "certification_order", "certify_sentences",
               "reachable_signature")
