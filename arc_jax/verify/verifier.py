"""A complete verifier for LSTM and Bi-LSTM classifiers: exact robustness beyond enumeration.

For an example (x, y) and a space S, the question is whether every string of S(x) is classified
y. Each example ends in one of three states:

* ``robust``: a proof, the leaves of a tree of sub-spaces of S(x) (:mod:`arc_jax.verify.subspaces`)
  that partition its application choices, each certified by the ARC DP, enumerated (every string
  classified y) or empty;
* ``not robust``: a member of S(x) that the model misclassifies, checked by a concrete forward
  pass;
* ``unknown``: the node budget ran out.

Pipeline (cheap answers first, each stage only sees the examples still open):

1. x itself (a wrong clean prediction is a counterexample);
2. S(x) with at most :data:`ENUMERATE_FIRST` choices: every member classified (cheaper than the
   DP or an attack there);
3. the DP on S(x) (certified examples are proved);
4. ``samples`` uniform members (:func:`arc_jax.verify.subspaces.samples`), classified;
5. S(x) with at most ``enumerate_below`` choices: every member classified;
6. the HotFlip beam (:func:`arc_jax.attacks.hotflip_candidates`), classified (about 9 ms per
   sentence, less than a search costs);
7. branch and bound per example: a stack of open sub-spaces; nodes with at most
   ``enumerate_below`` choices are enumerated, the others are certified ``batch_size`` at a time
   by one jitted DP call (the sub-spaces are rows of one plan,
   :func:`~arc_jax.verify.subspaces.lower`);
   each uncertified node is attacked with one random member and then split at a window chosen
   by ``window_rule``.

Members are classified in packs across examples, as word-id strings, by prefix-shared logits
(:mod:`arc_jax.nn.shared_prefixes`: one cell step per distinct prefix, 3.7 times fewer steps than
one by one on the Normal LSTM's members of [(Del,2),(Sub,2)]) for final and mean pooling, with
every near tie re-decided by :func:`~arc_jax.nn.predict`; by predict for attention pooling.

Soundness: ``robust`` needs every leaf closed, and the leaves partition S(x)'s choices (the split
is exact), so every string of S(x) is in a certified (DP soundness), enumerated or empty leaf.
``not robust`` returns a concrete misclassified member. Completeness: a node that is not certified
is split, a split strictly shrinks the set of splittable windows, and a node without splittable
windows holds only the choices made of its forced picks, which are enumerated; so with an
unbounded budget every example ends ``robust`` or ``not robust``, and the answer equals EX.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from typing import Any, Callable, Mapping, Sequence

import numpy as np
from flax import nnx

from arc_jax.attacks.hotflip import hotflip_candidates
from arc_jax.attacks.journal import Journal, digest
from arc_jax import domains
from arc_jax import interval as iv
from arc_jax.certify.api import (MAX_GRID_SLOTS, CertifyResult, certify_jit, check_grid,
                                 check_inputs, check_sentences)
from arc_jax.certify.deprecated import deprecated
from arc_jax.certify.sequence import certify_sentences
from arc_jax.padding import bucket
from arc_jax.domain import Domain
from arc_jax.nn.models import LSTMClassifier, predict
from arc_jax.nn.shared_prefixes import SHARED_POOLINGS, predict_shared
from arc_jax.nn.tree_models import TreeLSTMClassifier
from arc_jax.perturbation.plans import PlanBuilder
from arc_jax.perturbation.spaces import Space, Tokens
from arc_jax.verify import subspaces as sub

WINDOW_RULES = ("first", "last", "balanced")
"""Which window to split an uncertified node at:

* ``first``: the leftmost splittable window;
* ``last``: the rightmost one;
* ``balanced``: the one whose largest child has the fewest choices (exact counts).

``first`` is the default. Where the DP certifies few sub-spaces (an ordinarily trained model)
the search is mostly enumeration, and splitting at the leftmost window leaves the leaves free
at the sentence's end, where their members share long prefixes (one cell step per distinct
prefix, :mod:`arc_jax.nn.shared_prefixes`). Measured on the 2-core CPU, warm passes, the same
verdicts under both rules: the Normal LSTM's first 40 test sentences under [(Ins,4),(Sub,4)]
(256 nodes) in 26.7 s against 44.2 s with ``last``, and the ARC LSTM's first 100 in 9.5 s
against 14.8 s (``last`` had certified with the fewest sub-spaces on small random LSTMs:
benchmarks/README.md). Results made before ``evaluate.py`` recorded the rule used ``last``.
"""

DEFAULT_WINDOW_RULE = "first"
"""The rule :func:`verify` and ``evaluate.py --metrics exact`` split by unless told otherwise."""

ROBUST, NOT_ROBUST, UNKNOWN = "robust", "not robust", "unknown"

SHARED_PACK = 16384
"""Strings per prefix-shared prediction call (the fastest of 4,096, 16,384 and 65,536 on the
Normal LSTM's members of [(Del,2),(Sub,2)])."""

ENUMERATE_FIRST = 512
"""Spaces of at most this many choices are enumerated before the DP or an attack runs on them.
On the Normal LSTM's first 200 SST-2 test sentences under [(Del,2),(Sub,2)] (median 77 choices)
a DP row costs about 1.75 ms, against about 0.02 ms per enumerated member
(:mod:`arc_jax.nn.shared_prefixes`; random members share fewer prefixes and cost more each)."""

TIE = 2.0 ** -12
"""Prefix-shared logits closer than this (relative) to a tie are re-decided by predict."""


@dataclasses.dataclass(frozen=True)
class Verdict:
  """The outcome for one example.

  Attributes:
    status: ``"robust"``, ``"not robust"`` or ``"unknown"``.
    stage: what settled it: ``"clean"``, ``"certified"``, ``"enumerated"``, ``"attack"`` or
      ``"search"``.
    counterexample: the misclassified member (``not robust``), else None.
    proof: the closed leaves (``robust``): per leaf its path
      (:meth:`~arc_jax.verify.subspaces.SubSpace.describe`), how it was closed
      (``"certified"``, ``"enumerated"``, ``"empty"``) and its number of choices.
    nodes_certified: sub-spaces sent to the DP, the root included.
    members_classified: strings classified concretely (attacks and enumeration).
    choices: number of application choices of S(x).
    seconds: the verification's running time (over all its resumed parts) when this verdict
      was reached.
  """

  status: str
  stage: str
  counterexample: Tokens | None
  proof: tuple[dict, ...]
  nodes_certified: int
  members_classified: int
  choices: int
  seconds: float = 0.0

  def to_json(self) -> dict[str, Any]:
    return {"status": self.status, "stage": self.stage,
            "counterexample": None if self.counterexample is None else list(self.counterexample),
            "proof_leaves": len(self.proof), "nodes_certified": self.nodes_certified,
            "members_classified": self.members_classified, "choices": self.choices}


@dataclasses.dataclass(frozen=True)
class VerifyResult:
  """What :func:`verify` decided about n examples, in the input order.

  Attributes:
    verdicts: one :class:`Verdict` per example.
    seconds: the wall time of :func:`verify`, with that of the earlier parts a journal resumed.
    certificates: the DP's certificates of every example on all of S(x) (what
      :func:`arc_jax.certify.certify` computes in the same domain), with ``certified``,
      ``margins``, ``logits_lo``, ``logits_hi`` and ``clean_logits`` as there; computed on first
      access, since verify runs the DP on S(x) only where enumerating costs more.
  """

  verdicts: tuple[Verdict, ...]
  seconds: float
  certify_all: Callable[[], CertifyResult] = dataclasses.field(repr=False, compare=False)

  @functools.cached_property
  def certificates(self) -> CertifyResult:
    return self.certify_all()

  def flags(self, status: str) -> np.ndarray:
    """bool (n,): whether each example's status is ``status``."""
    return np.array([v.status == status for v in self.verdicts], bool)

  @property
  def robust(self) -> np.ndarray:
    """bool (n,): proved robust (every string of S(x) is classified y); ``certificates.
    certified`` implies it, and it implies EX."""
    return self.flags(ROBUST)

  def summary(self) -> dict[str, Any]:
    stages: dict[str, int] = {}
    for v in self.verdicts:
      key = f"{v.status}/{v.stage}"
      stages[key] = stages.get(key, 0) + 1
    return {"examples": len(self.verdicts), "proofs": int(self.flags(ROBUST).sum()),
            "counterexamples": int(self.flags(NOT_ROBUST).sum()),
            "unknowns": int(self.flags(UNKNOWN).sum()), "seconds": round(self.seconds, 3),
            "by_stage": dict(sorted(stages.items())),
            "nodes_certified": sum(v.nodes_certified for v in self.verdicts),
            "members_classified": sum(v.members_classified for v in self.verdicts)}


class _Model:
  """Concrete predictions and DP certificates of one model, at fixed batch shapes."""

  def __init__(self, model: LSTMClassifier, space: Space, vocab: Mapping[str, int], rows: int,
               predict_rows: int, min_replacement_slots: int, domain: Domain):
    self.model_graphdef, self.model_state = nnx.split(model)
    self.space, self.vocab, self.rows, self.predict_rows = space, vocab, rows, predict_rows
    self.builder = PlanBuilder(space, vocab, min_replacement_slots=min_replacement_slots)
    self.domain = domain
    self.shared = model.pooling in SHARED_POOLINGS
    self.word_of = {i: w for w, i in vocab.items()}

  def certify(self, plan, labels: np.ndarray):
    """The DP's :class:`~arc_jax.certify.Certificate` of a plan's rows (on the whole grid, in
    the verifier's domain)."""
    return certify_jit(self.model_graphdef, self.space.signature, self.model_state, plan,
                       labels, domain=self.domain)

  def ids(self, tokens: Sequence[str]) -> tuple[int, ...]:
    """The word ids of a token string."""
    return tuple(self.vocab[w] for w in tokens)

  def id_node(self, node: sub.SubSpace) -> sub.SubSpace:
    """``node`` with every replacement written in word ids (its members are id strings)."""
    allowed = tuple(tuple(tuple(self.ids(r) for r in f) for f in row) for row in node.allowed)
    return dataclasses.replace(node, allowed=allowed)

  def words(self, ids: Sequence[int]) -> Tokens:
    """The token string of word ids."""
    return tuple(self.word_of[i] for i in ids)

  def predict_classes(self, strings: Sequence[Sequence[int]]) -> np.ndarray:
    """Classes (len(strings),) of id strings by :func:`~arc_jax.nn.predict`, in batches of
    ``predict_rows`` sorted by length, each padded to a length bucket (as EX classifies)."""
    order = np.argsort([len(s) for s in strings], kind="stable")
    out = np.zeros(len(strings), np.int64)
    for start in range(0, len(order), self.predict_rows):
      idx = order[start:start + self.predict_rows]
      lengths = np.zeros(self.predict_rows, np.int32)
      lengths[:len(idx)] = [len(strings[i]) for i in idx]
      token_ids = np.zeros((self.predict_rows, bucket(max(int(lengths.max()), 1))), np.int32)
      for row, i in zip(token_ids, idx):
        row[:len(strings[i])] = strings[i]
      logits = predict(self.model_graphdef, self.model_state, token_ids, lengths)
      out[idx] = np.argmax(np.asarray(logits)[:len(idx)], axis=-1)
    return out

  def classify(self, strings: Sequence[Sequence[int]]) -> np.ndarray:
    """Classes (len(strings),) of id strings as :meth:`predict_classes` decides them.

    Final and mean pooling: logits of at most ``SHARED_PACK`` strings at a time by
    :func:`~arc_jax.nn.shared_prefixes.predict_shared` (one cell step per distinct prefix),
    which differ from predict's by the rounding of how its matmuls batch rows (at most 7e-7 on
    the Normal LSTM's 48,824 members of [(Del,2),(Sub,2)], logits up to 5.3); a string whose two
    largest logits are within :data:`TIE` of each other (relative to 1 + the largest) is
    re-decided by predict, so no decision rests on that rounding.
    """
    if not self.shared or not strings:
      return self.predict_classes(strings)
    size = -(-len(strings) // -(-len(strings) // SHARED_PACK))  # packs of near-equal size
    logits = np.concatenate([predict_shared(self.model_graphdef, self.model_state,
                                            strings[start:start + size])
                             for start in range(0, len(strings), size)])
    top = np.sort(logits, axis=-1)[:, -2:]
    out = np.argmax(logits, axis=-1)
    near = np.flatnonzero(top[:, 1] - top[:, 0] <= TIE * (1 + np.abs(top[:, 1])))
    if len(near):
      out[near] = self.predict_classes([strings[i] for i in near])
    return out

  def certify_nodes(self, tokens: Tokens, label: int, nodes: Sequence[sub.SubSpace]
                    ) -> np.ndarray:
    """Whether the DP certifies each node of one sentence (bool (len(nodes),))."""
    base = self.builder.build([tokens])
    plan = sub.lower(base, self.space, self.vocab, nodes, self.rows)
    return np.asarray(self.certify(plan, np.full((self.rows,), label, np.int32)).certified
                      )[:len(nodes)]


def _choose_window(space: Space, node: sub.SubSpace, rule: str) -> tuple[int, int] | None:
  windows = sub.splittable(space, node)
  if not windows:
    return None
  if rule == "first":
    return windows[0]
  if rule == "last":
    return windows[-1]
  largest = lambda w: max(sub.count(space, c) for c in sub.split(space, node, *w))
  return min(windows, key=largest)


def _search(model: _Model, tokens: Tokens, ids: tuple[int, ...], label: int,
            rng: np.random.Generator, *,
            window_rule: str, blocks: int, enumerate_below: int, max_nodes: int
            ) -> tuple[str, Tokens | None, list[dict], int, int]:
  """Branch and bound on one example (``tokens``, their word ``ids``) whose root was neither
  certified nor refuted.

  Returns (status, counterexample, proof leaves, nodes certified, members classified).
  """
  space = model.space
  root = sub.full(space, tokens)
  window = _choose_window(space, root, window_rule)
  # The root was certified (and failed) already: start from its children.
  stack = ([root] if window is None or sub.count(space, root) <= enumerate_below
           else sub.split(space, root, *window, blocks=blocks))
  leaves: list[dict] = []
  certified_nodes, classified = 0, 0
  leaf = lambda node, how, size: {**node.describe(space), "closed": how, "choices": size}
  while stack:
    if certified_nodes >= max_nodes:
      return UNKNOWN, None, leaves, certified_nodes, classified
    small, large = [], []
    while stack and len(large) < model.rows:
      node = stack.pop()
      size = sub.count(space, node)
      if size == 0:
        leaves.append(leaf(node, "empty", 0))
      elif size <= enumerate_below or not sub.splittable(space, node):
        small.append((node, size))
      else:
        large.append((node, size))
    strings = [s for node, _ in small for s in sub.members(space, ids, model.id_node(node))]
    if strings:
      classified += len(strings)
      wrong = np.flatnonzero(model.classify(strings) != label)
      if len(wrong):
        return NOT_ROBUST, model.words(strings[wrong[0]]), [], certified_nodes, classified
      leaves += [leaf(node, "enumerated", size) for node, size in small]
    if not large:
      continue
    nodes = [node for node, _ in large]
    certified_nodes += len(nodes)
    ok = model.certify_nodes(tokens, label, nodes)
    open_nodes = [node for node, good in zip(nodes, ok) if not good]
    leaves += [leaf(node, "certified", size) for (node, size), good in zip(large, ok) if good]
    probes = [s for node in open_nodes for s in sub.samples(space, tokens, node, rng, 1)]
    if probes:
      classified += len(probes)
      wrong = np.flatnonzero(model.classify([model.ids(s) for s in probes]) != label)
      if len(wrong):
        return NOT_ROBUST, probes[wrong[0]], [], certified_nodes, classified
    for node in open_nodes:
      stack += sub.split(space, node, *_choose_window(space, node, window_rule), blocks=blocks)
  return ROBUST, None, leaves, certified_nodes, classified


def _takes_graphdef_state(verify_fn):
  """Also accepts the previous release's ``verify(graphdef, state, space, ...)`` and ``rows=``
  (kept for one release, each with a DeprecationWarning naming its replacement)."""

  @functools.wraps(verify_fn)
  def wrapper(model, *args, **options):
    if isinstance(model, nnx.GraphDef):
      deprecated("verify(graphdef, state, space, ...)",
                 "verify(model, space, ...) with model = nnx.merge(graphdef, state)")
      state, *args = args
      model = nnx.merge(model, *(state if isinstance(state, tuple) else (state,)))
    if "rows" in options:
      deprecated("verify(..., rows=)", "verify(..., batch_size=)")
      options["batch_size"] = options.pop("rows")
    return verify_fn(model, *args, **options)

  return wrapper


@_takes_graphdef_state
def verify(model: LSTMClassifier, space: Space, sentences: Sequence[Sequence[str]],
           labels: Sequence[int], vocab: Mapping[str, int], *,
           window_rule: str = DEFAULT_WINDOW_RULE,
           blocks: int = 1, enumerate_below: int = 8192, max_nodes: int = 4096,
           batch_size: int = 32, max_grid_slots: int = MAX_GRID_SLOTS, predict_rows: int = 256,
           samples: int = 32, beam: int = 5, min_replacement_slots: int = 1, seed: int = 0,
           domain: Domain | str = iv.SOUND, journal: Journal | None = None) -> VerifyResult:
  """Exact robustness of n examples (see the module docstring), for LSTMs and Bi-LSTMs of every
  pooling.

  Takes the model, space, examples, labels and vocabulary as :func:`arc_jax.certify.certify`
  does, and its ``batch_size``, ``max_grid_slots`` and ``domain``; the previous release's
  ``verify(graphdef, state, space, ...)`` and ``rows=`` still work, with a DeprecationWarning.

  Args:
    model: an :class:`~arc_jax.nn.LSTMClassifier` (LSTM or Bi-LSTM, any pooling, any registered
      recurrent cell).
    space: the perturbation space; restricted to ``vocab`` here.
    sentences: n token lists; every token in ``vocab``.
    labels: int (n,).
    vocab: word → id.
    window_rule: one of :data:`WINDOW_RULES`.
    blocks: ``apply`` children per split (the replacements of the window partitioned in that
      many blocks; 1: one child "T_k applied with any of its replacements").
    enumerate_below: spaces and sub-spaces with at most this many choices are enumerated, not
      certified.
    max_nodes: per example, the most sub-spaces certified in the search before ``unknown``.
    batch_size: sentences, or sub-spaces of one sentence, per DP call (one compiled shape per
      length bucket).
    max_grid_slots: the largest decomposition grid verified without asking (as for
      :func:`arc_jax.certify.certify`).
    predict_rows: strings per concrete prediction call.
    samples: uniform members of S(x) classified before the search.
    beam: HotFlip beam width (0: no HotFlip).
    min_replacement_slots: as :class:`~arc_jax.perturbation.PlanBuilder` (the largest synonym
      list keeps one shape).
    seed: the sampling seed.
    domain: the abstract domain of every certification (a sound one:
      :data:`arc_jax.interval.SOUND`, or :data:`arc_jax.linear_step.LINEAR_STEP`, tighter and
      slower), or its registered name (:mod:`arc_jax.domains`: ``"interval"``,
      ``"linear_step"``).
    journal: where each verdict is written as soon as it is reached, and taken from when an
      earlier verification with the same key (the caller's, and the labels and every setting
      here) stopped before the end (:class:`~arc_jax.attacks.Journal` of :class:`Verdict`);
      None: nothing is kept.

  Returns:
    A :class:`VerifyResult`: a verdict per example and the DP's certificates of S(x).

  Raises:
    ValueError: (one line, naming the fix) a Tree-LSTM (verify has no tree sub-spaces: certify
      trees with :func:`arc_jax.certify.certify`) or another model type, an unknown window
      rule, bad search settings, and the input errors of :func:`arc_jax.certify.certify`
      (sentences, labels, a space given as a string or split, its grid, float64 parameters
      without 64-bit mode, vocabulary ids outside the embedding table, an unknown domain name).
  """
  if isinstance(model, TreeLSTMClassifier):
    raise ValueError("Tree-LSTMs are not supported by verify (it splits S(x) at windows of a "
                     "token sequence): certify trees with arc_jax.certify.certify(model, space, "
                     "trees, labels, vocab), the tree DP.")
  if not isinstance(model, LSTMClassifier):
    raise ValueError(f"verify decides LSTMClassifier models (LSTMs, Bi-LSTMs), not "
                     f"{type(model).__name__}.")
  if window_rule not in WINDOW_RULES:
    raise ValueError(f"Unknown window_rule {window_rule!r}; choose one of {WINDOW_RULES}.")
  if blocks < 1 or batch_size < 1 or max_nodes < 0 or enumerate_below < 0:
    raise ValueError("verify needs blocks >= 1, batch_size >= 1, max_nodes >= 0 and "
                     f"enumerate_below >= 0 (got {blocks}, {batch_size}, {max_nodes}, "
                     f"{enumerate_below}).")
  domain = domains.resolve(domain)
  check_inputs(model, space, vocab)
  tic = time.perf_counter()
  labels = check_sentences(sentences, labels, model.num_classes)
  sentences = [tuple(s) for s in sentences]
  check_grid(space.signature, space, batch_size, model.hidden, model.embeddings[...].itemsize,
             max_grid_slots)
  dp = functools.partial(certify_sentences, model, space, batch_size=batch_size,
                         max_grid_slots=max_grid_slots, domain=domain)
  space = space.restricted_to(vocab)
  model = _Model(model, space, vocab, batch_size, predict_rows, min_replacement_slots, domain)
  rng = np.random.default_rng(seed)
  n = len(sentences)
  roots = [sub.full(space, s) for s in sentences]
  ids = [model.ids(s) for s in sentences]  # members are enumerated and classified as ids
  id_roots = [model.id_node(root) for root in roots]
  choices = [sub.count(space, root) for root in roots]
  verdicts: list[Verdict | None] = [None] * n
  classified = np.ones(n, np.int64)
  certified_nodes = np.zeros(n, np.int64)
  if journal is not None:
    settings = dict(window_rule=window_rule, blocks=blocks, enumerate_below=enumerate_below,
                    max_nodes=max_nodes, batch_size=batch_size, samples=samples, beam=beam,
                    min_replacement_slots=min_replacement_slots, seed=seed,
                    domain=repr(domain))
    restored = journal.start({"examples": n, "labels": digest(labels), **settings}, Verdict)
    for i, verdict in restored.items():
      verdicts[i] = verdict
  written = [v is not None for v in verdicts]
  earlier = max((v.seconds for v in verdicts if v is not None), default=0.0)

  def settle(i, status, stage, counterexample=None, proof=()):
    verdicts[i] = Verdict(status, stage, counterexample, tuple(proof), int(certified_nodes[i]),
                          int(classified[i]), choices[i],
                          round(earlier + time.perf_counter() - tic, 3))

  def record() -> None:
    """Writes the verdicts reached since the last call to the journal."""
    new = [i for i in range(n) if verdicts[i] is not None and not written[i]]
    for i in new:
      written[i] = True
    if journal is not None:
      journal.append((i, verdicts[i]) for i in new)

  def root_leaf(i, how):
    return [{**roots[i].describe(space), "closed": how, "choices": choices[i]}]

  for i in np.flatnonzero(model.predict_classes(ids) != labels):
    if verdicts[i] is None:
      settle(i, NOT_ROBUST, "clean", sentences[i])

  def refute(pairs: list[tuple[int, tuple[int, ...]]], stage: str) -> None:
    """Classifies (example, id member) pairs together; settles each first misclassification."""
    wrong = model.classify([s for _, s in pairs]) != labels[[i for i, _ in pairs]]
    for (i, s), bad in zip(pairs, wrong):
      classified[i] += 1
      if bad and verdicts[i] is None:
        settle(i, NOT_ROBUST, stage, model.words(s))

  def enumerate_up_to(limit: int) -> None:
    """Enumerates the open spaces of at most ``limit`` choices, members packed across examples."""
    small = [i for i in range(n) if verdicts[i] is None and choices[i] <= limit]
    refute([(i, s) for i in small for s in sub.members(space, ids[i], id_roots[i])], "enumerated")
    for i in small:
      if verdicts[i] is None:
        settle(i, ROBUST, "enumerated", proof=root_leaf(i, "enumerated"))
    record()

  # Spaces of at most ENUMERATE_FIRST choices cost less to enumerate than to certify or attack.
  enumerate_up_to(min(ENUMERATE_FIRST, enumerate_below))
  large = [i for i in range(n) if verdicts[i] is None]
  if large:
    certified_nodes[large] += 1
    for i in np.asarray(large)[dp([sentences[i] for i in large], labels[large],
                                  vocab).certified]:
      settle(i, ROBUST, "certified", proof=root_leaf(i, "certified"))
    record()
  # Uniform members before any larger enumeration, the HotFlip beam before any search.
  large = [i for i in range(n) if verdicts[i] is None]
  refute([(i, s) for i in large for s in sub.samples(space, ids[i], id_roots[i], rng, samples)],
         "attack")
  enumerate_up_to(enumerate_below)
  large = [i for i in range(n) if verdicts[i] is None]
  if large and beam:
    found = hotflip_candidates(model.model_graphdef, model.model_state, space,
                               [sentences[i] for i in large], labels[large], vocab, beam=beam)
    refute([(i, model.ids(c)) for i, candidates in zip(large, found) for c in candidates],
           "attack")
    record()
  for i in [i for i in range(n) if verdicts[i] is None]:
    status, counterexample, proof, nodes, members = _search(
        model, sentences[i], ids[i], int(labels[i]), rng, window_rule=window_rule, blocks=blocks,
        enumerate_below=enumerate_below, max_nodes=max_nodes)
    certified_nodes[i] += nodes
    classified[i] += members
    settle(i, status, "search", counterexample, proof)
    record()
  return VerifyResult(tuple(verdicts), earlier + time.perf_counter() - tic,
                      functools.partial(dp, sentences, labels, vocab))
