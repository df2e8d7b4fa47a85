"""Exhaustive robustness (EX Acc): classify every member of S(x), stopping at the first error.

The exact robustness of a model at (x, y) under a space S: every string of S(x) is classified as
y. Protocol (docs/ORIGINAL.md §6): a wrong clean prediction is not robust; with ``shortcut`` a
certified example is robust without enumeration (the certificate proves it); otherwise S(x) is
enumerated and classified until the first misclassified string.

The protocol is the same for strings (:func:`exhaustive_robustness`) and trees
(:func:`exhaustive_tree_robustness`, members of S(t) as nested pairs); only the enumeration and
the batching of members differ. Members of several examples are packed into fixed-shape batches
(``batch_size`` rows, widths padded to length buckets, trees to the builder's node count), so the
jitted predictor compiles once per bucket. The batches are pulled lazily from one stream of
(example, member) pairs that checks each example's "failed" flag before producing its next
member: once an example has a misclassified member, the rest of its space is never enumerated.
One batch is in flight while the next is enumerated and lowered (the host works while the device
classifies), so at most the other rows of the batch holding that member and of the batch after
it are spent on it (the batch slack). All clean examples are classified first, in batches of
their own and settled before any enumeration starts, so an example with a wrong clean
prediction costs exactly one row and is never enumerated. With a
:class:`~arc_jax.attacks.journal.Journal` each example is written down once decided, and a search
stopped before the end resumes from there.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from typing import Callable, Iterable, Iterator, Mapping, Sequence

import jax
import numpy as np
from tqdm.auto import tqdm

from arc_jax.attacks.journal import Decided, Journal, Member, digest, to_json
from arc_jax.data.batching import make_batch
from arc_jax.data.embeddings import check_vocabulary
from arc_jax.data.trees import Nested, Tree, from_nested, to_nested
from arc_jax.perturbation.spaces import Space, Tokens
from arc_jax.perturbation.trees import TreeBatch, TreeBatchBuilder, TreeSpace

PredictFn = Callable[[np.ndarray, np.ndarray], jax.Array]
"""``predict_logits(token_ids (B, N) int32, lengths (B,) int32) -> logits (B, K)``."""

PredictTreeFn = Callable[[TreeBatch], jax.Array]
"""``predict_root_logits(batch) -> logits (B, K)`` of the root of every tree of the batch."""

@dataclasses.dataclass(frozen=True)
class AuditFailure:
  """A certified example with a misclassified member of S(x): the certificate was wrong.

  Attributes:
    index: position of the example in the evaluated split.
    sentence: the example x (a tree as nested pairs).
    label: its label y.
    member: the member of S(x) that is misclassified (x itself if the clean prediction is wrong).
    predicted: the class the model gives ``member``.
  """

  index: int
  sentence: Member
  label: int
  member: Member
  predicted: int

  def to_json(self) -> dict:
    return {"index": self.index, "sentence": to_json(self.sentence), "label": self.label,
            "member": to_json(self.member), "predicted": self.predicted}


@dataclasses.dataclass(frozen=True)
class ExhaustiveResult:
  """Per-example outcome of :func:`exhaustive_robustness` (or the tree version) for n examples.

  ``certified_accuracy ≤ exhaustive_accuracy ≤ accuracy`` holds whenever ``audit_failures`` is
  empty: robust examples are correct (x is the first member classified), and a certified
  example that is not robust is an audit failure.

  Attributes:
    correct: bool (n,), the clean prediction equals the label.
    robust: bool (n,), every string of S(x) is classified as the label (taken from the
      certificate for certified examples in shortcut mode).
    certified: bool (n,), the certificates passed in (all False if none were).
    enumerated: bool (n,), S(x) was enumerated beyond x: the clean prediction is correct and
      no trusted certificate answered the example.
    members_evaluated: int (n,), strings classified per example, x included; after a
      misclassification this includes the example's other members in the same batch.
    counterexamples: per example, the first misclassified member found, or None if robust.
    audit_failures: certified examples with a misclassified member (see :class:`AuditFailure`).
    shortcut: whether certified examples were trusted without enumeration.
    resumed: examples taken from an earlier search's journal (0 without one).
    seconds: the search's running time, the earlier parts of a resumed search included.
  """

  correct: np.ndarray
  robust: np.ndarray
  certified: np.ndarray
  enumerated: np.ndarray
  members_evaluated: np.ndarray
  counterexamples: tuple[Member | None, ...]
  audit_failures: tuple[AuditFailure, ...]
  shortcut: bool
  resumed: int = 0
  seconds: float = 0.0

  @property
  def num_examples(self) -> int:
    return len(self.robust)

  def _rate(self, flags: np.ndarray) -> float:
    return float(np.mean(flags)) if len(flags) else 0.0

  @property
  def accuracy(self) -> float:
    return self._rate(self.correct)

  @property
  def certified_accuracy(self) -> float:
    return self._rate(self.certified)

  @property
  def exhaustive_accuracy(self) -> float:
    return self._rate(self.robust)

  def summary(self) -> dict:
    """JSON-ready totals: accuracies, counts, members evaluated and the audit failures."""
    return {
        "num_examples": self.num_examples,
        "accuracy": self.accuracy,
        "certified_accuracy": self.certified_accuracy,
        "exhaustive_accuracy": self.exhaustive_accuracy,
        "num_correct": int(np.sum(self.correct)),
        "num_certified": int(np.sum(self.certified)),
        "num_robust": int(np.sum(self.robust)),
        "num_enumerated": int(np.sum(self.enumerated)),
        "members_evaluated": int(np.sum(self.members_evaluated)),
        "max_members_evaluated": int(np.max(self.members_evaluated, initial=0)),
        "shortcut": self.shortcut,
        "resumed": self.resumed,
        "audit_failures": [f.to_json() for f in self.audit_failures],
    }


def _stream(entries: Iterable[tuple[int, Iterable[Member]]], failed: np.ndarray,
            finished: np.ndarray) -> Iterator[tuple[int, Member]]:
  """(example, member) pairs from (example, members) entries, in order.

  ``failed[i]`` is read before each member of example i is produced, so once the consumer sets
  it (between batches) the rest of that example's members are never enumerated.
  ``finished[i]`` is set once an entry of example i has produced all it will.
  """
  for i, members in entries:
    members = iter(members)
    while not failed[i] and (member := next(members, None)) is not None:
      yield i, member
    finished[i] = True


def _batches(pairs: Iterator[tuple[int, Member]], size: int) -> Iterator[list[tuple[int, Member]]]:
  """Consecutive lists of ``size`` pairs (the last one shorter), pulled lazily one batch at a time."""
  while batch := list(itertools.islice(pairs, size)):
    yield batch


def exhaustive_robustness(predict_logits: PredictFn, space: Space,
                          sentences: Sequence[Sequence[str]], labels: Sequence[int],
                          vocab: Mapping[str, int], *, certified: Sequence[bool] | None = None,
                          shortcut: bool = True, batch_size: int = 256,
                          progress: bool = False,
                          journal: Journal | None = None) -> ExhaustiveResult:
  """Exact robustness of a classifier on n examples by enumerating their perturbation spaces.

  The space is restricted to ``vocab`` first (as :func:`arc_jax.certify.certify` does), so both
  describe the same S(x).

  Args:
    predict_logits: ``(token_ids (B, N) int32, lengths (B,) int32) -> logits (B, K)``, e.g.
      ``functools.partial(arc_jax.nn.predict, *nnx.split(model))``. It is always called with
      ``B = batch_size`` and N a length bucket, so a jitted function compiles once per bucket.
    space: the perturbation space S.
    sentences: n tokenised sentences, every token in ``vocab``.
    labels: (n,) labels.
    vocab: word → id (0 = padding).
    certified: (n,) certificates of the same model and space (``certify(...)["certified"]``),
      or None if there are none.
    shortcut: trust certificates: a certified example is robust iff its clean prediction is
      correct, without enumerating S(x). False (audit mode) enumerates certified examples too
      and reports every certified example with a misclassified member as an audit failure.
    batch_size: rows per predictor call.
    progress: show a tqdm bar over examples.
    journal: where decided examples are written as the search goes, and taken from when an
      earlier search with the same key stopped before the end (:mod:`arc_jax.attacks.journal`);
      None: nothing is kept.

  Returns:
    An :class:`ExhaustiveResult`; a certified example whose clean prediction is wrong is an
    audit failure in both modes.
  """
  sentences = [tuple(s) for s in sentences]
  check_vocabulary(sentences, vocab)
  space = space.restricted_to(vocab)

  def classify(members: list[Tokens]) -> jax.Array | np.ndarray:
    batch = make_batch(members, [0] * len(members), range(len(members)), vocab, batch_size)
    return predict_logits(batch.token_ids, batch.lengths)

  return _exhaustive(sentences, labels, certified,
                     lambda i: itertools.islice(space.enumerate(sentences[i]), 1, None), classify,
                     shortcut=shortcut, batch_size=batch_size, progress=progress,
                     journal=journal)


def exhaustive_tree_robustness(predict_root_logits: PredictTreeFn, space: TreeSpace,
                               trees: Sequence[Tree], builder: TreeBatchBuilder, *,
                               certified: Sequence[bool] | None = None, shortcut: bool = True,
                               batch_size: int = 256, progress: bool = False,
                               journal: Journal | None = None) -> ExhaustiveResult:
  """:func:`exhaustive_robustness` for Tree-LSTMs: every tree of S(t) (``space.enumerate``)
  must be classified as t's root label at its root.

  Args:
    predict_root_logits: ``(batch) -> root logits (B, K)``; always called with ``B =
      batch_size`` trees lowered by ``builder`` (fix its node count, e.g.
      ``node_buckets=(N,)``, so a jitted predictor compiles once per number of schedule steps).
    space: the tree space, restricted to the vocabulary (``tree_space(space.restricted_to(
      vocab))``).
    trees: n trees; their root labels are the labels.
    builder: lowers member trees (its vocabulary must hold every leaf and Sub candidate).
    certified, shortcut, batch_size, progress, journal: as :func:`exhaustive_robustness`.

  Returns:
    An :class:`ExhaustiveResult` whose counterexamples (and audit failures) are nested pairs.
  """
  def classify(members: list[Nested]) -> jax.Array | np.ndarray:
    return predict_root_logits(builder.build([from_nested(m) for m in members], batch_size))

  return _exhaustive([to_nested(t) for t in trees], [t.label for t in trees], certified,
                     lambda i: itertools.islice(space.enumerate(trees[i]), 1, None), classify,
                     shortcut=shortcut, batch_size=batch_size, progress=progress,
                     journal=journal)


def _exhaustive(examples: Sequence[Member], labels: Sequence[int],
                certified: Sequence[bool] | None, rest_of_space: Callable[[int], Iterable[Member]],
                classify: Callable[[list[Member]], jax.Array | np.ndarray], *, shortcut: bool,
                batch_size: int, progress: bool, journal: Journal | None) -> ExhaustiveResult:
  """The EX protocol for any kind of member.

  Args:
    examples: the n examples x (each the first member of its S(x) to be classified).
    labels: (n,) labels.
    certified: (n,) certificates, or None.
    rest_of_space: ``rest_of_space(i)`` yields the members of S(x_i) other than x_i, lazily.
    classify: logits (B ≥ m, K) of a list of m ≤ ``batch_size`` members (rows beyond m are
      padding); a device array still computing is waited for only after the next batch is
      lowered, so the host enumerates while the device classifies.
    shortcut, batch_size, progress, journal: see :func:`exhaustive_robustness`.
  """
  tic = time.perf_counter()
  labels = np.asarray(labels, np.int64).reshape(-1)
  n = len(examples)
  certified = (np.zeros(n, bool) if certified is None
               else np.asarray(certified, bool).reshape(-1))
  if batch_size < 1:
    raise ValueError(f"batch_size must be >= 1, got {batch_size}.")
  if not n == len(labels) == len(certified):
    raise ValueError(f"Got {n} examples, {len(labels)} labels and {len(certified)} certified "
                     "flags; pass one of each per example.")
  trusted = certified & shortcut
  correct = np.zeros(n, bool)
  failed = np.zeros(n, bool)
  evaluated = np.zeros(n, np.int64)
  counterexamples: list[Member | None] = [None] * n
  predicted_at_failure = np.zeros(n, np.int64)
  # Examples an earlier search decided (its journal), and those this one has written there.
  restored = {} if journal is None else journal.start(
      {"examples": n, "labels": digest(labels), "certified": digest(certified),
       "shortcut": shortcut})
  earlier_seconds = max((d.seconds for d in restored.values()), default=0.0)
  for i, d in restored.items():
    correct[i], failed[i], evaluated[i] = d.correct, d.failed, d.evaluated
    counterexamples[i], predicted_at_failure[i] = d.counterexample, d.predicted
  written = np.zeros(n, bool)
  written[list(restored)] = True
  clean_finished = np.zeros(n, bool)
  rest_finished = np.zeros(n, bool)
  # Clean examples first, in batches of their own (so the first row classified for an example
  # is its x, and a wrong one stops it before enumeration), then the rest of S(x) for the
  # examples not answered by their certificate.
  phases = (
      _batches(_stream(((i, (examples[i],)) for i in np.flatnonzero(~written).tolist()),
                       failed, clean_finished), batch_size),
      _batches(_stream(((i, rest_of_space(i)) for i in np.flatnonzero(~trusted & ~written)
                        .tolist()), failed, rest_finished), batch_size))

  def record(decided: np.ndarray) -> None:
    """Writes the examples newly in ``decided`` to the journal."""
    new = np.flatnonzero(decided & ~written)
    written[new] = True
    if journal is not None:
      seconds = round(earlier_seconds + time.perf_counter() - tic, 3)
      journal.append((i, Decided(bool(correct[i]), bool(failed[i]), int(evaluated[i]),
                                 counterexamples[i], int(predicted_at_failure[i]), seconds))
                     for i in new.tolist())

  def settle(rows, logits, finished: np.ndarray) -> None:
    """Takes in a batch's classes; ``finished``: the examples all of whose members were in
    this batch or earlier ones (as the stream stood when the batch was pulled)."""
    predicted = np.argmax(np.asarray(logits)[:len(rows)], axis=-1)
    for (i, member), p in zip(rows, predicted.tolist()):
      y = labels[i]
      if evaluated[i] == 0:
        correct[i] = p == y
      evaluated[i] += 1
      if p != y and not failed[i]:
        failed[i] = True
        counterexamples[i] = member
        predicted_at_failure[i] = p
    decided = written | failed | finished
    record(decided)
    bar.update(np.count_nonzero(decided) - bar.n)

  with tqdm(total=n, unit="example", desc="exhaustive", disable=not progress) as bar:
    bar.update(len(restored))
    for batches in phases:  # one batch in flight: the next is enumerated while it computes
      in_flight = None
      for rows in batches:
        launched = (rows, classify([m for _, m in rows]),
                    (trusted & clean_finished) | rest_finished)
        if in_flight is not None:
          settle(*in_flight)
        in_flight = launched
      if in_flight is not None:
        settle(*in_flight)
    record(np.ones(n, bool))  # the last entries finish when the stream runs dry
    bar.update(n - bar.n)

  audit_failures = tuple(
      AuditFailure(int(i), examples[i], int(labels[i]), counterexamples[i],
                   int(predicted_at_failure[i]))
      for i in np.flatnonzero(certified & failed))
  return ExhaustiveResult(correct=correct, robust=~failed, certified=certified,
                          enumerated=correct & ~trusted, members_evaluated=evaluated,
                          counterexamples=tuple(counterexamples), audit_failures=audit_failures,
                          shortcut=shortcut, resumed=len(restored),
                          seconds=earlier_seconds + time.perf_counter() - tic)
