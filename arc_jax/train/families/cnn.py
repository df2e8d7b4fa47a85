"""CNN classifiers of token sequences (SST-2): the :data:`CNN` family (``config.model = "cnn"``),
A3T's model (Zhang et al. 2020), which the paper's Table 4 trains A3T on.

The CNN reads the sequence family's batches, so everything but the model and its certificate is
:mod:`arc_jax.train.families.sequence`'s: data, plans, batches, sampling (data augmentation),
HotFlip (training and HF), enumeration (EX). Its certificate is the interval bound of
:func:`arc_jax.nn.cnn.cnn_feature_bounds`: A3T's per-position hulls for Sub-only spaces, and a
coarser sound bound that joins shifted positions for spaces that delete or insert words; it is
also the CNN's :func:`arc_jax.certify.certify_model` and its A3T interval abstraction
(:func:`arc_jax.certify.augmented.certify_intervals`; per-position hulls), both registered here,
so ARC-A3T and A3T train CNNs with it.

Its settings block is ``config.cnn`` (:data:`SETTINGS`).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import chex
import jax
import ml_collections
import numpy as np
from flax import nnx

from arc_jax import domains
from arc_jax import interval as iv
from arc_jax.certify import Certificate, certify_jit, certify_model
from arc_jax.certify import certify as certify_examples
from arc_jax.certify.api import (certify_batches, check_inputs, check_sentences,
                                 padded_labels)
from arc_jax.certify.augmented import certify_intervals, check_interval_space
from arc_jax.certify.certificate import CertifyResult, certified_by
from arc_jax.data import Batch, ExperimentData
from arc_jax.domain import Domain
from arc_jax.nn.cnn import CNNClassifier, certified_logits
from arc_jax.perturbation import PlanBuilder
from arc_jax.perturbation.plans import Plan
from arc_jax.perturbation.spaces import Signature, Space
from arc_jax.settings import Setting, Settings
from arc_jax.train.families import sequence
from arc_jax.train.families.base import ModelFamily, ModelFunctions

SETTINGS = Settings("cnn", {
    "filters": Setting(100, "cnn: filters of the convolution (A3T's SST-2 CNN: 100)"),
    "kernel_width": Setting(5, "cnn: words per convolution window (A3T's SST-2 CNN: 5)"),
})
"""The CNN family's settings (``config.cnn``)."""


def make_model(config: ml_collections.ConfigDict, data: ExperimentData) -> CNNClassifier:
  c = config.cnn
  return CNNClassifier(data.embeddings, filters=c.filters, kernel_width=c.kernel_width,
                       num_classes=2, dropout_rate=config.dropout_rate,
                       rngs=nnx.Rngs(config.seed))


def certify_cnn(model: CNNClassifier, space: Space | Signature, plan: Plan, labels: jax.Array,
                eps: jax.Array | float = 1.0, dropout_key: jax.Array | None = None,
                domain: Domain = iv.SOUND) -> Certificate:
  """:func:`arc_jax.certify.certify_model` for CNNs: the certificate of the interval bounds
  (:func:`arc_jax.nn.cnn.certified_logits`) of a lowered batch."""
  logits, clean, margins = certified_logits(model, space, plan, labels, eps, dropout_key, domain)
  return Certificate(logits, clean, margins, certified_by(margins, labels))


certify_model.register(CNNClassifier, certify_cnn)


@certify_intervals.register
def interval_abstraction(model: CNNClassifier, space: Space | Signature, plan: Plan,
                         labels: jax.Array, eps: jax.Array | float = 1.0,
                         dropout_key: jax.Array | None = None, domain: Domain = iv.SOUND
                         ) -> Certificate:
  """A3T's interval abstraction of a 1→1 (Sub-only) space for the CNN
  (:func:`arc_jax.certify.augmented.certify_intervals`): its bound, which for such a space is the
  per-position hull of each word and its replacements, as A3T's."""
  check_interval_space(space)
  return certify_cnn(model, space, plan, labels, eps, dropout_key, domain)


@certify_examples.register
def certify_sentences(model: CNNClassifier, space: Space, sentences: Sequence[Sequence[str]],
                      labels: Sequence[int], vocab: Mapping[str, int], *, batch_size: int = 32,
                      eps: float = 1.0, max_grid_slots: int = 0,
                      domain: Domain | str = iv.SOUND) -> CertifyResult:
  """:func:`arc_jax.certify.certify` for CNNs: raw token lists (the space restricted to
  ``vocab`` first), in jitted batches of ``batch_size`` rows sorted by length; the bounds keep
  no decomposition grid, so ``max_grid_slots`` is unused.

  Raises:
    ValueError: as :func:`arc_jax.certify.api.certify_sentences` for the inputs, and for a
      domain other than the interval domains.
  """
  del max_grid_slots
  domain = domains.resolve(domain)
  check_inputs(model, space, vocab)
  labels = check_sentences(sentences, labels, model.num_classes)
  space = space.restricted_to(vocab)
  builder = PlanBuilder(space, vocab)
  graphdef, state = nnx.split(model)
  order = np.asarray(sorted(range(len(sentences)), key=lambda i: len(sentences[i])), np.int64)

  def lower(idx):
    plan = builder.build([sentences[i] for i in idx], batch_size=batch_size)
    return plan, padded_labels(labels[idx], batch_size)

  return certify_batches(order, batch_size, lower, lambda plan, y: certify_jit(
      graphdef, space.signature, state, plan, y, eps, domain=domain))


def certify(model: CNNClassifier, signature: Signature, batch: Batch, eps, dropout_key, domain,
            **options) -> Certificate:
  """The CNN's interval certificate of the batch's plans (no family options)."""
  if options:
    raise TypeError(f"The CNN family takes no certification options, not {sorted(options)}.")
  chex.assert_rank(batch.token_ids, 2)
  return certify_cnn(model, signature, batch.plan, batch.labels, eps, dropout_key, domain)


CNN = ModelFamily(
    name="cnn", datasets=("sst2",), robust_losses=("worst_case", "max_of_means"),
    lowering=sequence.LOWERING,
    model=ModelFunctions(make_model=make_model, forward=sequence.forward, certify=certify,
                         targets=sequence.targets, rows=sequence.rows,
                         take_rows=sequence.take_rows),
    searches=sequence.SEARCHES, settings=SETTINGS)
"""A3T's CNN on SST-2 sentences (``config.model = "cnn"``)."""
