"""Exhaustive robustness (EX Acc): classify every string of S(x), stopping at the first error.

The exact robustness of a model at (x, y) under a space S: every string of S(x) is classified as
y. Protocol (REFERENCE.md §8): a wrong clean prediction is not robust; with ``shortcut`` a
certified example is robust without enumeration (the certificate proves it); otherwise S(x) is
enumerated and classified until the first misclassified string.

Members of several examples are packed into fixed-shape batches (``batch_size`` rows, widths
padded to length buckets), so the jitted predictor compiles once per length bucket. The batches
are pulled lazily from one stream of (example, member) pairs that checks each example's "failed"
flag before producing its next member: once an example has a misclassified member, the rest of
its space is never enumerated. At most the other rows of the batch holding that member are
spent on it (the batch slack). All clean sentences are classified first, in batches of their
own, so an example with a wrong clean prediction costs exactly one row and is never enumerated.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Callable, Iterable, Iterator, Mapping, Sequence

import jax
import numpy as np
from tqdm.auto import tqdm

from arc_jax.data.batching import make_batch
from arc_jax.perturbation.spaces import Space, Tokens

PredictFn = Callable[[np.ndarray, np.ndarray], jax.Array]
"""``predict_logits(token_ids (B, N) int32, lengths (B,) int32) -> logits (B, K)``."""


@dataclasses.dataclass(frozen=True)
class AuditFailure:
  """A certified example with a misclassified member of S(x): the certificate was wrong.

  Attributes:
    index: position of the example in the evaluated split.
    sentence: the example x.
    label: its label y.
    member: the string of S(x) that is misclassified (x itself if the clean prediction is wrong).
    predicted: the class the model gives ``member``.
  """

  index: int
  sentence: Tokens
  label: int
  member: Tokens
  predicted: int

  def to_json(self) -> dict:
    return {"index": self.index, "sentence": list(self.sentence), "label": self.label,
            "member": list(self.member), "predicted": self.predicted}


@dataclasses.dataclass(frozen=True)
class ExhaustiveResult:
  """Per-example outcome of :func:`exhaustive_robustness` for n examples.

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
    counterexamples: per example, the first misclassified string found, or None if robust.
    audit_failures: certified examples with a misclassified member (see :class:`AuditFailure`).
    shortcut: whether certified examples were trusted without enumeration.
  """

  correct: np.ndarray
  robust: np.ndarray
  certified: np.ndarray
  enumerated: np.ndarray
  members_evaluated: np.ndarray
  counterexamples: tuple[Tokens | None, ...]
  audit_failures: tuple[AuditFailure, ...]
  shortcut: bool

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
        "audit_failures": [f.to_json() for f in self.audit_failures],
    }


def _stream(entries: Iterable[tuple[int, Iterable[Tokens]]], failed: np.ndarray,
            finished: np.ndarray) -> Iterator[tuple[int, Tokens]]:
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


def _batches(pairs: Iterator[tuple[int, Tokens]], size: int) -> Iterator[list[tuple[int, Tokens]]]:
  """Consecutive lists of ``size`` pairs (the last one shorter), pulled lazily one batch at a time."""
  while batch := list(itertools.islice(pairs, size)):
    yield batch


def _check_inputs(sentences: Sequence[Tokens], labels: np.ndarray, certified: np.ndarray,
                  vocab: Mapping[str, int], batch_size: int) -> None:
  if batch_size < 1:
    raise ValueError(f"batch_size must be >= 1, got {batch_size}.")
  if not len(sentences) == len(labels) == len(certified):
    raise ValueError(f"Got {len(sentences)} sentences, {len(labels)} labels and "
                     f"{len(certified)} certified flags; pass one of each per example.")
  for i, sentence in enumerate(sentences):
    missing = [w for w in sentence if w not in vocab]
    if missing:
      raise KeyError(f"Sentence {i} has tokens outside the vocabulary: {missing[:5]}. Drop "
                     "out-of-vocabulary tokens first (arc_jax.data.drop_oov).")


def exhaustive_robustness(predict_logits: PredictFn, space: Space,
                          sentences: Sequence[Sequence[str]], labels: Sequence[int],
                          vocab: Mapping[str, int], *, certified: Sequence[bool] | None = None,
                          shortcut: bool = True, batch_size: int = 256,
                          progress: bool = False) -> ExhaustiveResult:
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

  Returns:
    An :class:`ExhaustiveResult`; a certified example whose clean prediction is wrong is an
    audit failure in both modes.
  """
  sentences = [tuple(s) for s in sentences]
  labels = np.asarray(labels, np.int64).reshape(-1)
  certified = (np.zeros(len(sentences), bool) if certified is None
               else np.asarray(certified, bool).reshape(-1))
  _check_inputs(sentences, labels, certified, vocab, batch_size)
  space = space.restricted_to(vocab)
  trusted = certified & shortcut
  n = len(sentences)
  failed = np.zeros(n, bool)
  clean_finished = np.zeros(n, bool)
  rest_finished = np.zeros(n, bool)
  # Clean sentences first, in batches of their own (so the first row classified for an example
  # is its x, and a wrong one stops it before enumeration), then the rest of S(x)
  # (Space.enumerate yields x first) for the examples not answered by their certificate.
  batches = itertools.chain(
      _batches(_stream(((i, (x,)) for i, x in enumerate(sentences)), failed, clean_finished),
               batch_size),
      _batches(_stream(((i, itertools.islice(space.enumerate(sentences[i]), 1, None))
                        for i in np.flatnonzero(~trusted).tolist()), failed, rest_finished),
               batch_size))

  correct = np.zeros(n, bool)
  evaluated = np.zeros(n, np.int64)
  counterexamples: list[Tokens | None] = [None] * n
  predicted_at_failure = np.zeros(n, np.int64)
  with tqdm(total=n, unit="example", desc="exhaustive", disable=not progress) as bar:
    for rows in batches:
      batch = make_batch([m for _, m in rows], labels[[i for i, _ in rows]], range(len(rows)),
                         vocab, batch_size)
      logits = np.asarray(predict_logits(batch.token_ids, batch.lengths))
      predicted = np.argmax(logits[:len(rows)], axis=-1)
      for (i, member), p, y in zip(rows, predicted.tolist(), batch.labels.tolist()):
        if evaluated[i] == 0:
          correct[i] = p == y
        evaluated[i] += 1
        if p != y and not failed[i]:
          failed[i] = True
          counterexamples[i] = member
          predicted_at_failure[i] = p
      # Every member a finished entry produced has now been classified.
      decided = failed | (trusted & clean_finished) | rest_finished
      bar.update(np.count_nonzero(decided) - bar.n)
    bar.update(n - bar.n)  # the last entries finish when the stream runs dry

  audit_failures = tuple(
      AuditFailure(int(i), sentences[i], int(labels[i]), counterexamples[i],
                   int(predicted_at_failure[i]))
      for i in np.flatnonzero(certified & failed))
  return ExhaustiveResult(correct=correct, robust=~failed, certified=certified,
                          enumerated=correct & ~trusted, members_evaluated=evaluated,
                          counterexamples=tuple(counterexamples), audit_failures=audit_failures,
                          shortcut=shortcut)
