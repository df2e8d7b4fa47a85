"""Lowering tokenised sentences and a space into the padded arrays the certification DP consumes.

Conventions (every array is indexed by the batch row ``b`` and the 0-based position ``j`` of the
*last* token of a window, because the DP (docs/ALGORITHM.md §2) extends prefixes that end at ``j``):

* ``N`` is a length bucket (see :func:`arc_jax.padding.bucket`), so a handful of shapes cover a
  whole dataset and the jitted DP compiles once per bucket.
* Padding positions (``j >= lengths[b]``) carry token id 0 and never match.
* For transformation k, the replacements of the window ``x[j-s_k+1 .. j]`` are described per output
  token l < t_k by the set of distinct words that occur at place l in some replacement (the DP hulls
  their embeddings); ``R_k`` is a power-of-two bucket of the largest such set in the batch.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from arc_jax.padding import LENGTH_BUCKETS, bucket, pow2_at_least, reverse_padded, word_ids
from arc_jax.perturbation.shapes import ShapeMenu, fit_shape_menu
from arc_jax.perturbation.spaces import Signature, Space


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class TransformationPlan:
  """Where one transformation T_k = (φ, f, s, t) applies in a batch, and what it writes.

  Attributes:
    match: bool (B, N). ``match[b, j]``: φ_k holds for the window ending at position j of
      sentence b (and it has at least one replacement).
    replacement_ids: int32 (B, N, t_k, R_k). Word ids at output place l of the replacements of
      that window; entries beyond ``replacement_mask`` are 0.
    replacement_mask: bool (B, N, t_k, R_k). Which entries of ``replacement_ids`` are real.
  """

  match: np.ndarray
  replacement_ids: np.ndarray
  replacement_mask: np.ndarray


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Plan:
  """A batch of sentences lowered for certification under a space.

  Attributes:
    token_ids: int32 (B, N), word ids of the sentences, 0 at padding.
    lengths: int32 (B,), number of real tokens per row (0 for a padding row).
    transformations: one :class:`TransformationPlan` per transformation of the space, in order.
    keep: optional bool (B, N). ``keep[b, j]`` False forbids leaving token j of row b unchanged
      (the DP's "keep x_j" branch); None allows it everywhere. With ``match`` and
      ``replacement_mask`` it expresses the sub-spaces of the complete verifier
      (``arc_jax.verify``), e.g. "T_k is applied at this window".
    reachable: optional budgets (static), at least the most windows each T_k matches in a row:
      the DP runs on the space's grid with δ_k cut to them (:func:`on_reachable_grid`); None
      runs it on the whole grid. Dropping matches keeps it valid; adding some does not.
    distinct_words: optional bound (static, a power of two) on the number of distinct ids in
      ``token_ids`` and every ``replacement_ids``, padding id 0 included: the DP embeds and
      projects each distinct word once (:func:`arc_jax.certify.lstm_dp.word_pre_activations`).
      Set by :meth:`PlanBuilder.build`; a host plan refuses a bound below its count.
  """

  token_ids: np.ndarray
  lengths: np.ndarray
  transformations: tuple[TransformationPlan, ...]
  keep: np.ndarray | None = None
  reachable: tuple[int, ...] | None = dataclasses.field(default=None, metadata=dict(static=True))
  distinct_words: int | None = dataclasses.field(default=None, metadata=dict(static=True))

  def __post_init__(self):
    # A bound below the count would make the DP read another word's box: check every host plan
    # (plans made inside jitted code come from checked ones by dropping ids).
    if self.distinct_words is None:
      return
    if all(isinstance(a, np.ndarray) for a in plan_word_ids(self)):
      count = distinct_word_count(self)
      if count > self.distinct_words:
        raise ValueError(f"The plan holds {count} distinct word ids, more than its "
                         f"distinct_words bound {self.distinct_words}: make plans with "
                         "PlanBuilder.build, or pass distinct_words=None.")

  @property
  def shape(self) -> tuple[int, int]:
    return tuple(self.token_ids.shape)


def plan_word_ids(plan: Plan) -> list:
  """The arrays of word ids a plan holds: its tokens and every transformation's replacements."""
  return [plan.token_ids] + [tp.replacement_ids for tp in plan.transformations]


def distinct_word_count(plan: Plan) -> int:
  """The number of distinct ids in :func:`plan_word_ids` of a host (numpy) plan."""
  return len(np.unique(np.concatenate([a.ravel() for a in plan_word_ids(plan)])))


class PlanBuilder:
  """Builds :class:`Plan` batches for a fixed space and vocabulary, caching window look-ups.

  Args:
    space: the perturbation space.
    vocab: word → id (id 0 is reserved for padding). Every token of a sentence and every word a
      replacement can produce must be in it: restrict the space with
      ``space.restricted_to(vocab)`` first.
    length_buckets: allowed padded lengths N.
    min_replacement_slots: lower bound on every R_k. Setting it to the largest R_k a dataset
      needs (e.g. 8 for the counter-fitted neighbours) keeps one shape per length bucket, so the
      jitted DP compiles once per bucket instead of once per (bucket, R) pair.
    shape_menu: optional bound on the (width, reachable grid) shapes of the plans
      (:mod:`arc_jax.perturbation.shapes`; :meth:`bound_shapes` fits one): plans are padded to
      the width of the entry their rows fit, and :func:`reachable_signature` given the menu
      picks its grid. None: every plan on its length bucket and exact reachable grid.
  """

  def __init__(self, space: Space, vocab: Mapping[str, int],
               length_buckets: Sequence[int] = LENGTH_BUCKETS, min_replacement_slots: int = 1,
               shape_menu: ShapeMenu | None = None):
    self.space = space
    self.vocab = vocab
    self.shape_menu = shape_menu
    self.length_buckets = tuple(length_buckets)
    self.min_replacement_slots = min_replacement_slots
    self._cache = [dict() for _ in space.transformations]
    self._shapes: dict[tuple[str, ...], tuple[int, tuple[int, ...]]] = {}

  def _ids(self, words: Sequence[str]) -> list[int]:
    return word_ids(self.vocab, words, "drop out-of-vocabulary tokens from the sentences and "
                    "restrict the space with space.restricted_to(vocab) before building plans.")

  def _replacement_ids(self, k: int, window: tuple[str, ...]) -> tuple[tuple[int, ...], ...]:
    """Per output place l, the distinct ids at place l of T_k's replacements (cached)."""
    cache = self._cache[k]
    if window not in cache:
      t = self.space.transformations[k]
      per_place = [[] for _ in range(t.t)]
      repl = t.replacements(window)
      for r in repl:
        for l, i in enumerate(self._ids(r)):
          if i not in per_place[l]:
            per_place[l].append(i)
      cache[window] = (bool(repl), tuple(tuple(p) for p in per_place))
    return cache[window]

  def reachable_budgets(self, sentence: Sequence[str]) -> tuple[int, ...]:
    """Per transformation, min(δ_k, number of windows of ``sentence`` that T_k rewrites).

    No string of S(x) applies T_k more often: each application rewrites a window of its own.
    Certification groups sentences by these budgets (see :func:`reachable_signature`).
    """
    sentence = tuple(sentence)
    budgets = []
    for k, (t, delta) in enumerate(zip(self.space.transformations, self.space.budgets)):
      count = 0
      for i in range(len(sentence) - t.s + 1):
        if count == delta:  # no need to count further windows
          break
        count += self._replacement_ids(k, sentence[i:i + t.s])[0]
      budgets.append(count)
    return tuple(budgets)

  def exact_shape(self, sentence: Sequence[str]) -> tuple[int, tuple[int, ...]]:
    """The length bucket and :meth:`reachable_budgets` of a sentence (memoised: batching asks
    for every row's shape at every epoch)."""
    sentence = tuple(sentence)
    if sentence not in self._shapes:
      self._shapes[sentence] = (bucket(max(len(sentence), 1), self.length_buckets),
                                self.reachable_budgets(sentence))
    return self._shapes[sentence]

  def grid_group(self, sentence: Sequence[str]) -> tuple[int, ...]:
    """The padded width and DP budgets a sentence runs on (its :meth:`exact_shape`, fitted to
    :attr:`shape_menu` if any): rows of one group share them, so batches are built within
    groups."""
    width, budgets = self.exact_shape(sentence)
    if self.shape_menu is not None:
      width, budgets = self.shape_menu.fit(width, budgets)
    return (width, *budgets)

  def bound_shapes(self, sentences: Sequence[Sequence[str]], max_shapes: int) -> ShapeMenu | None:
    """Sets and returns :attr:`shape_menu`: at most ``max_shapes`` shapes fitted to the exact
    shapes of ``sentences`` (:func:`~arc_jax.perturbation.shapes.fit_shape_menu`; 0: None, no
    bound)."""
    counts = collections.Counter(self.exact_shape(s) for s in sentences)
    self.shape_menu = fit_shape_menu(counts, max_shapes)
    return self.shape_menu

  def build(self, sentences: Sequence[Sequence[str]], batch_size: int | None = None) -> Plan:
    """Lowers ``sentences`` into one :class:`Plan`, padded to ``batch_size`` rows if given."""
    rows = len(sentences) if batch_size is None else batch_size
    if rows < len(sentences):
      raise ValueError(f"{len(sentences)} sentences do not fit in a batch of {batch_size}.")
    sentence_ids = [self._ids(sent) for sent in sentences]  # unknown tokens first
    hits = []  # per transformation: (b, j, per-place ids) of every window it rewrites
    for k, t in enumerate(self.space.transformations):
      hits.append([])
      for b, sent in enumerate(sentences):
        sent = tuple(sent)
        for start in range(len(sent) - t.s + 1):
          ok, ids = self._replacement_ids(k, sent[start:start + t.s])
          if ok:
            hits[k].append((b, start + t.s - 1, ids))
    n_max = max((len(s) for s in sentences), default=0)
    n = bucket(max(n_max, 1), self.length_buckets)
    if self.shape_menu is not None:
      most = [max(np.bincount([b for b, *_ in found], minlength=1)) for found in hits]
      n = self.shape_menu.fit(n, np.minimum(self.space.budgets, most))[0]
    token_ids = np.zeros((rows, n), np.int32)
    lengths = np.zeros((rows,), np.int32)
    for b, ids in enumerate(sentence_ids):
      lengths[b] = len(ids)
      token_ids[b, :len(ids)] = ids

    plans = []
    for t, found in zip(self.space.transformations, hits):
      r = pow2_at_least(max([len(p) for *_, ids in found for p in ids]
                            + [self.min_replacement_slots]))
      match = np.zeros((rows, n), bool)
      repl_ids = np.zeros((rows, n, t.t, r), np.int32)
      repl_mask = np.zeros((rows, n, t.t, r), bool)
      for b, j, ids in found:
        match[b, j] = True
        for l, place in enumerate(ids):
          repl_ids[b, j, l, :len(place)] = place
          repl_mask[b, j, l, :len(place)] = True
      plans.append(TransformationPlan(match, repl_ids, repl_mask))
    plan = Plan(token_ids, lengths, tuple(plans))
    # A batch repeats its words (the same synonyms and stop words at many positions): SST-2 test
    # batches of 32 hold 4–33× fewer distinct ids than id entries. The bound is a power of two
    # of at least twice the token slots, so batches of one shape share it unless they hold more
    # (SST-2 training batches hold at most 1.43 distinct ids per token slot, so ARC training
    # compiles no more shapes than without the table; SST-2 test batches up to 3.1).
    bound = pow2_at_least(max(distinct_word_count(plan), 2 * token_ids.size))
    return dataclasses.replace(plan, distinct_words=bound)


def reachable_signature(space: Space | Signature, plan: Plan,
                        menu: ShapeMenu | None = None) -> Signature:
  """The signature of ``space`` with each δ_k cut to the most windows T_k matches in a row,
  raised to the grid of the ``menu`` entry the plan fits if a menu is given.

  The DP on this smaller grid computes every slot it keeps exactly as on the full grid (slot c
  reads only slots c' ≤ c), and every slot it drops is ⊥ (it needs more applications of some
  T_k than the row has windows), so certificates are the same and the scan does less work; a
  grid between it and the full one keeps both properties. Host-side (numpy): the result is a
  static argument of the jitted DP. Distinct results are at most Π_k (δ_k + 1) per length
  bucket, or the menu's entries.
  """
  sig = space.signature
  most = [int(np.asarray(tp.match).sum(axis=1).max(initial=0)) for tp in plan.transformations]
  budgets = tuple(min(d, m) for d, m in zip(sig.budgets, most))
  if menu is not None:
    budgets = menu.fit(plan.token_ids.shape[1], budgets)[1]
  return dataclasses.replace(sig, budgets=budgets)


def on_reachable_grid(space: Space | Signature, plan: Plan, menu: ShapeMenu | None = None) -> Plan:
  """``plan`` with its static ``reachable`` budgets set to those of :func:`reachable_signature`:
  the DP (``certified_features``) then runs on that smaller grid, with the same results, inside
  any jitted step that takes the plan (training steps compile once per width and grid).
  Host-side (numpy)."""
  return dataclasses.replace(plan, reachable=reachable_signature(space, plan, menu).budgets)


def reverse_plan(plan: Plan, space: Space | Signature) -> Plan:
  """The plan of the reversed sentences under ``space.reversed()``, computed from ``plan``.

  Pure jnp (usable inside jit). Position j' of a reversed sentence of length n is position
  n-1-j' of the original; T_k^R's window ending at j' is T_k's window ending at n-2-j'+s_k, with
  the output places in reverse order.
  """
  n_pad = plan.token_ids.shape[1]
  lengths = jnp.asarray(plan.lengths)[:, None]
  positions = jnp.arange(n_pad)[None, :]
  real = positions < lengths
  token_ids = reverse_padded(plan.token_ids, plan.lengths)
  out = []
  for s, tp in zip(space.signature.s, plan.transformations):
    end = lengths - 2 - positions + s
    ok = real & (positions >= s - 1)
    end = jnp.clip(end, 0, n_pad - 1)
    match = ok & jnp.take_along_axis(jnp.asarray(tp.match), end, axis=1)
    gather = lambda a: jnp.flip(jnp.take_along_axis(jnp.asarray(a), end[:, :, None, None], axis=1), 2)
    repl_mask = gather(tp.replacement_mask) & match[:, :, None, None]
    repl_ids = jnp.where(repl_mask, gather(tp.replacement_ids), 0)
    out.append(TransformationPlan(match, repl_ids, repl_mask))
  keep = None if plan.keep is None else reverse_padded(plan.keep, plan.lengths, fill=True)
  return Plan(token_ids, jnp.asarray(plan.lengths), tuple(out), keep, plan.reachable,
              plan.distinct_words)
