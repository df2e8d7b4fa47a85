"""The training objectives and evaluation row functions, written once over a model family's
functions (:class:`~arc_jax.train.families.ModelFamily`: ``forward``, ``certify``, ``targets``,
``rows``).

An objective (:data:`~arc_jax.train.steps.Objective`) and a row function
(:data:`~arc_jax.train.steps.RowsFn`) report one :class:`~arc_jax.train.steps.RowMetrics` row per
example, so the steps of :mod:`arc_jax.train.steps` and the metric totals are the same for every
family. The factories are memoised, so that the memoised steps compile once per family and
space.
"""

from __future__ import annotations

import functools

import optax

from arc_jax import interval
from arc_jax.train import losses
from arc_jax.train.families import ModelFamily
from arc_jax.train.steps import MeanObjective, Objective, RowMetrics, RowsFn


@functools.cache
def clean_objective(family: ModelFamily) -> Objective:
  """Cross-entropy of the concrete forward pass on the family's targets (normal training, data
  augmentation, HotFlip adversarial training, and ARC while λ = 0)."""
  def objective(model, batch, dropout_key, step):
    del step
    logits = family.model.forward(model, batch, dropout_key)
    return losses.cross_entropy(logits, *family.model.targets(batch)), family.model.rows(batch, logits)

  return objective


@functools.cache
def classify_rows(family: ModelFamily) -> RowsFn:
  """Correctness of the concrete forward pass without dropout (the ``acc`` metric)."""
  def rows(model, batch) -> RowMetrics:
    return family.model.rows(batch, family.model.forward(model, batch, None))

  return rows


@functools.cache
def certify_rows(family: ModelFamily, signature, **options) -> RowsFn:
  """Correctness and certificate (ε = 1, sound domain) of every example from one certification
  pass without dropout: its clean logits (DP slot 0) and its certificate. ``options``: the
  family's DP options (``join`` for Tree-LSTMs)."""
  def rows(model, batch) -> RowMetrics:
    cert = family.model.certify(model, signature, batch, 1.0, None, interval.SOUND, **options)
    return family.model.rows(batch, cert.clean_logits, cert.certified, cert.margins)

  return rows


@functools.cache
def arc_objective(family: ModelFamily, signature, robust_weight: optax.Schedule,
                  eps: optax.Schedule, robust_loss: str) -> Objective:
  """ARC's ``(1 − λ(step))·clean + λ(step)·robust`` with hulls scaled by ε(step), from one DP
  call (with a dropout key, its clean logits are x's under the same dropout masks).

  Args:
    family: the model family.
    signature: the space's signature (static).
    robust_weight, eps: schedules of λ and ε.
    robust_loss: a key of :data:`losses.ROBUST_LOSSES` that ``family`` supports.
  """
  if robust_loss not in family.robust_losses:
    raise ValueError(f"robust_loss={robust_loss!r} is not available for {family.name!r}; "
                     f"choose one of {list(family.robust_losses)}.")
  robust_fn = losses.ROBUST_LOSSES[robust_loss]

  def objective(model, batch, dropout_key, step):
    # Surrogate bounds (no outward rounding): every reported certificate is computed at
    # evaluation, in the sound domain (certify_rows).
    cert = family.model.certify(model, signature, batch, eps(step), dropout_key, interval.UNROUNDED)
    labels, weights = family.model.targets(batch)
    clean = losses.cross_entropy(cert.clean_logits, labels, weights)
    robust = robust_fn(cert, labels, weights)
    return (losses.arc_loss(clean, robust, robust_weight(step)),
            family.model.rows(batch, cert.clean_logits, cert.certified))

  if family.model.take_rows is None or robust_loss not in losses.WEIGHTED_MEAN_LOSSES:
    return objective
  # Both terms are weighted means with the targets' weights: the step may split the batch.
  return MeanObjective(objective, lambda batch: family.model.targets(batch)[1], family.model.take_rows)
