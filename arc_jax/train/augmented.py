"""ARC-A3T and A3T training (paper appendix "Effectiveness of ARC-A3T"; Zhang, Albarghouthi and
D'Antoni, ICML 2020).

Both split ``config.space`` into an augmented part S_aug and an abstracted part S_abs
(``config.augmented.abstracted`` names the abstracted transformations; :mod:`arc_jax.perturbation.split`
gives the exact semantics) and train on the objective

    (1 − λ)·CE(x) + λ · max_{x' ∈ M(x)} CE(worst-case logits of S_abs|x'(x')),

with λ and ε on ARC's curriculum. M(x) ⊆ S_aug(x) holds x and ``augment_members`` (k)
more members, the example's rows of a batch of B·(k+1) rows (example-major; an example with fewer
than k other members repeats x). When M(x) = S_aug(x) the robust term bounds the loss of every
string of S(x); with k smaller it is the adversarial-training heuristic of both papers.

* ``arc_a3t`` (ARC-A3T): M(x) by enumeration, as the paper: every member of S_aug(x) is
  classified with the current parameters (no dropout) and the k with the highest cross-entropy
  are kept (the original keeps 2, ``--eaugment-by 2``, docs/ORIGINAL.md §5); S_abs|x' is
  abstracted with the ARC DP. Enumeration grows as n^δ with the sentence length n per augmented
  transformation (about n²/2 members for (Ins,2), C(#matches, 2) for (Sub,2)); where that is too
  many (larger δ, every PPDB candidate, long IMDB reviews) ``augment_search="hotflip"``
  takes the k best strings of a HotFlip beam search (beam k) instead.
* ``a3t`` (A3T (HotFlip), the paper's baseline): M(x) = x and the top-1 string of HotFlip's beam
  search over S_aug (A3T explores its augmentation space with HotFlip); S_abs, 1→1
  transformations (Sub) only, abstracted by A3T's intervals (one box per position, budgets
  ignored; :func:`arc_jax.certify.augmented.certify_intervals`).

Differences from the original code, on purpose: the abstracted part only rewrites windows the
augmented rewrites left untouched (the original certified S_abs on x' as a new sentence, which
reaches strings outside S(x)); the robust term is the maximum over M(x), not a mean over the
rows added to the batch; augmenting Sub does augment it (the original's enumeration had empty
substitution lists, docs/ORIGINAL.md §8 item 4).

Both methods read their settings from one block, :data:`SETTINGS` (``config.augmented``).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
from flax import nnx

from arc_jax import interval
from arc_jax.attacks import hotflip_search
from arc_jax.certify.augmented import ABSTRACTIONS, check_interval_space, member_plan
from arc_jax.data import Batch, make_batch
from arc_jax.perturbation import parse_space
from arc_jax.perturbation.spaces import Signature
from arc_jax.perturbation.split import Member, member_from_picks, split_space
from arc_jax.settings import Setting, Settings
from arc_jax.train import losses, steps
from arc_jax.train.families import FAMILIES, sequence
from arc_jax.train.families.sequence import make_predict_fn

if TYPE_CHECKING:
  from arc_jax.train.built import Built

SEARCHES = ("enumerate", "hotflip")
"""``augment_search``: how M(x) is drawn from S_aug(x)."""

SETTINGS = Settings("augmented", {
    "abstracted": Setting("", "arc_a3t / a3t: transformations of config.space abstracted by the "
                          "DP (comma-separated names, e.g. Del); the others are augmented"),
    "augment_search": Setting("enumerate", "arc_a3t / a3t: how the augmented part is explored",
                              choices=lambda: SEARCHES),
    "augment_members": Setting(2, "arc_a3t / a3t: members of the augmented part each example "
                               "trains on besides x", valid=(">= 1", lambda v: v >= 1)),
})
"""The settings of ARC-A3T and A3T (``config.augmented``)."""

_SCORE_ROWS = 256  # rows per forward pass when enumerated members are scored


def _cross_entropies(predict_logits, strings: Sequence, labels: np.ndarray, vocab) -> np.ndarray:
  """CE at ``labels`` of every string (float (n,)), in fixed-size batches sorted by length."""
  order = np.argsort([len(s) for s in strings], kind="stable")
  out = np.zeros(len(strings))
  for start in range(0, len(order), _SCORE_ROWS):
    idx = order[start:start + _SCORE_ROWS]
    batch = make_batch([strings[i] for i in idx], labels[idx], range(len(idx)), vocab,
                       _SCORE_ROWS)
    log_probs = jax.nn.log_softmax(predict_logits(batch.token_ids, batch.lengths)[:len(idx)])
    out[idx] = -np.take_along_axis(np.asarray(log_probs), labels[idx, None], axis=1)[:, 0]
  return out


def _enumerated_members(experiment: Built, split, params, rows, labels, k: int
                        ) -> list[list[Member]]:
  """Per sentence, x and the k members of S_aug(x) with the highest cross-entropy."""
  candidates = [split.members(x)[1:] for x in rows]
  owners = np.repeat(np.arange(len(rows)), [len(c) for c in candidates])
  flat = [m.tokens for c in candidates for m in c]
  predict_logits = make_predict_fn(experiment.graphdef, params, experiment.rest, experiment.mesh)
  scores = _cross_entropies(predict_logits, flat, np.asarray(labels)[owners],
                            experiment.data.vocab) if flat else np.zeros(0)
  first = np.concatenate([[0], np.cumsum([len(c) for c in candidates])])
  return [[Member.of(x)] + [c[i] for i in np.argsort(-scores[a:b], kind="stable")[:k]]
          for x, c, a, b in zip(rows, candidates, first[:-1], first[1:])]


def _hotflip_members(experiment: Built, split, params, rows, labels, k: int
                     ) -> list[list[Member]]:
  """Per sentence, x and the k strings of a HotFlip beam search (beam k) over S_aug(x)."""
  found = hotflip_search(experiment.graphdef, (params, experiment.rest), split.augmented, rows,
                         labels, experiment.data.vocab, beam=k,
                         batch_size=experiment.config.batch_size, mesh=experiment.mesh)
  return [[Member.of(x)] + [member_from_picks(split.augmented, x, [
      (p.start, p.transformation, p.replacement) for p in c.picks]) for c in candidates]
          for x, candidates in zip(rows, found)]


def member_batches(experiment: Built):
  """The batch transform: B examples → B·(k+1) rows, x and its members (example-major), with
  the DP plans of S_abs restricted to each member's free windows."""
  c = experiment.config.augmented
  split = split_space(experiment.space, c.abstracted)
  # Member plans run on the whole grid (no reachable grid), so no shape menu.
  builder = experiment.family.lowering.make_builder(experiment.data, split.abstract, 0)
  search = {"enumerate": _enumerated_members, "hotflip": _hotflip_members}[c.augment_search]
  slots = c.augment_members + 1

  def transform(batch: Batch, step: int, params: nnx.State) -> Batch:
    del step
    train = experiment.splits["train"]
    indices = batch.indices[batch.indices >= 0]
    rows = [tuple(train.tokens[i]) for i in indices]
    labels = np.asarray(train.labels)[indices]
    members = []
    for found in search(experiment, split, params, rows, labels, c.augment_members):
      members += found + [found[0]] * (slots - len(found))
    size = len(batch.labels) * slots
    plan = member_plan(builder, members, size)
    real = len(members)
    return Batch(plan.token_ids, plan.lengths,
                 np.concatenate([np.repeat(labels, slots), np.zeros(size - real, np.int32)]
                                ).astype(np.int32),
                 np.array([1.0] * real + [0.0] * (size - real), np.float32),
                 np.concatenate([np.repeat(indices, slots), -np.ones(size - real, np.int32)]
                                ).astype(np.int32), plan)

  return transform


@functools.cache
def augmented_objective(signature: Signature, slots: int, abstraction: str,
                        robust_weight: optax.Schedule, eps: optax.Schedule) -> steps.Objective:
  """``(1 − λ)·CE(x) + λ·max_m CE(worst-case logits of member m)`` on member batches.

  Args:
    signature: of S_abs (static).
    slots: k + 1 rows per example.
    abstraction: a key of :data:`arc_jax.certify.augmented.ABSTRACTIONS`.
    robust_weight, eps: schedules of λ and ε.

  The rows metrics are per example: correct = x's clean prediction, certified = every member's
  S_abs|x' certified.
  """
  certify_fn = ABSTRACTIONS[abstraction]

  def objective(model, batch: Batch, dropout_key, step):
    # Surrogate bounds (no outward rounding); reported certificates are computed at evaluation.
    cert = certify_fn(model, signature, batch.plan, batch.labels, eps(step), dropout_key,
                      interval.UNROUNDED)
    per_row = optax.softmax_cross_entropy_with_integer_labels(cert.worst_case_logits,
                                                              batch.labels)
    group = lambda a: a.reshape((-1, slots) + a.shape[1:])
    weights, labels = group(batch.weights)[:, 0], group(batch.labels)[:, 0]
    clean_logits = group(cert.clean_logits)[:, 0]
    clean = losses.cross_entropy(clean_logits, labels, weights)
    robust = losses.weighted_mean(group(per_row).max(axis=1), weights)
    correct = jnp.argmax(clean_logits, axis=-1) == labels
    return (losses.arc_loss(clean, robust, robust_weight(step)),
            steps.RowMetrics(weights, correct, group(cert.certified).all(axis=1)))

  return objective


def _objective_factory(abstraction: str):
  def factory(experiment: Built, robust_weight, eps) -> steps.Objective:
    c = experiment.config.augmented
    split = split_space(experiment.space, c.abstracted)
    return augmented_objective(split.abstract.signature, c.augment_members + 1,
                               abstraction, robust_weight, eps)
  return factory


dp_objective = _objective_factory("dp")
"""ARC-A3T's objective factory: S_abs|x' abstracted by the DP."""

interval_objective = _objective_factory("interval")
"""A3T's objective factory: S_abs|x' abstracted by intervals."""


def _check(config: ml_collections.ConfigDict, intervals: bool) -> None:
  sequences = sorted(name for name, f in FAMILIES.items() if f.lowering is sequence.LOWERING)
  if config.model not in sequences:  # its members are sentences, and sentence plans
    raise ValueError(f"trains models of token sequences only (config.model one of "
                     f"{sequences}), not {config.model!r}.")
  if config.robust_loss != "worst_case":
    raise ValueError("needs config.robust_loss='worst_case' (the maximum over members is per "
                     "example).")
  split = split_space(parse_space(config.space, synonyms={}), config.augmented.abstracted)
  if not split.abstracted:
    raise ValueError(f"config.augmented.abstracted is empty: name the transformations of "
                     f"{config.space} to abstract (e.g. 'Sub'), comma-separated.")
  if intervals:
    check_interval_space(split.abstract)


def check_arc_a3t(config: ml_collections.ConfigDict) -> None:
  """``validate``'s checks of ARC-A3T settings."""
  _check(config, intervals=False)


def check_a3t(config: ml_collections.ConfigDict) -> None:
  """``validate``'s checks of A3T settings (intervals: the abstracted part must be 1→1)."""
  _check(config, intervals=True)
