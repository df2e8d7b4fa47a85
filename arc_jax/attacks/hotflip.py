"""HotFlip beam search over programmable perturbation spaces (HF Acc, HotFlip adversarial training).

The attack of the original's ``GeneralHotFlipAttack`` (docs/ORIGINAL.md §5), for any space:

* A candidate is a set of *picks* (start, k, replacement) on the **original** string x:
  non-overlapping windows, at most δ_k picks of T_k. Its string applies all picks in parallel,
  so every string returned is a member of S(x) by construction.
* Beam search follows the space's order: for each (T_k, δ_k), δ_k rounds. In a round, every
  beam member not yet expanded for T_k is expanded: each pick of T_k whose window is still
  untouched gives a child scored

      score(child) = score(parent) + Σ_{p ≥ a} ∇_e L(cur)[p] · (e(new)[p] − e(old)[p]),

  a first-order estimate of the loss increase: a = the window's position in the parent's
  current string ``cur`` (original positions map to current ones through the earlier picks),
  ``old = cur[a:]``, ``new`` = the rewritten suffix cut or zero-padded to the old length, e the
  model's (frozen) input word vectors and L the cross-entropy at the label. The beam keeps the
  ``beam`` best of the old members (x itself and partial candidates included) and the children.
* Unlike the original's beam (keyed by candidate object), members are distinct *strings*: a
  child whose string is already present keeps the higher score. Ties keep the older member.

Batching: the beams of ``batch_size`` sentences (sorted by length) advance together, and each
round makes one jitted call: gradients of all unexpanded members (``batch_size · beam`` rows,
width a length bucket, so it compiles once per bucket) together with the suffix
sums of ∇_e L[p] · e(cur[p + s_k − t_k]) that score the shifted tail of every rewrite. The
replacement tokens' terms are gathered and summed with numpy over all picks of the round.

The beam, its rounds and the HF protocol are independent of what an example is
(:class:`BeamSearch`, :func:`search_in_chunks`, :func:`robustness`);
:mod:`arc_jax.attacks.tree_hotflip` reuses them for trees with its own picks and scores.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.experimental import multihost_utils
from jax.sharding import Mesh
from tqdm.auto import tqdm

from arc_jax import parallel
from arc_jax.data.batching import make_batch
from arc_jax.data.embeddings import check_vocabulary
from arc_jax.nn.models import predict
from arc_jax.padding import LENGTH_BUCKETS, bucket
from arc_jax.perturbation.spaces import Space, Tokens


@dataclasses.dataclass(frozen=True)
class Pick:
  """One application of a transformation to the original string.

  Attributes:
    start: first position of the window in the original string.
    transformation: index k of T_k in the space.
    replacement: the t_k tokens that replace the window.
  """

  start: int
  transformation: int
  replacement: Tokens


@dataclasses.dataclass(frozen=True)
class HotFlipCandidate:
  """A member of S(x) found by the beam search.

  Attributes:
    tokens: the string.
    score: accumulated first-order estimate of its loss increase over x (0 for x itself).
    picks: the picks applied to x, by start position.
  """

  tokens: Tokens
  score: float
  picks: tuple[Pick, ...]


@dataclasses.dataclass(frozen=True)
class HotFlipResult:
  """Per-example outcome of :func:`hotflip_robustness` for n examples.

  Attributes:
    correct: bool (n,), the clean prediction equals the label.
    robust: bool (n,), correct and every candidate is classified as the label (HF Acc).
    candidates: per example, the beam's strings, best first (empty where the clean prediction
      is wrong: those examples are not attacked).
    counterexamples: per example, the best-ranked misclassified candidate, or None.
  """

  correct: np.ndarray
  robust: np.ndarray
  candidates: tuple[tuple[Tokens, ...], ...]
  counterexamples: tuple[Tokens | None, ...]

  @property
  def accuracy(self) -> float:
    return float(np.mean(self.correct)) if len(self.correct) else 0.0

  @property
  def hotflip_accuracy(self) -> float:
    return float(np.mean(self.robust)) if len(self.robust) else 0.0

  def summary(self) -> dict:
    """JSON-ready totals."""
    return {"num_examples": len(self.robust), "accuracy": self.accuracy,
            "hotflip_accuracy": self.hotflip_accuracy, "num_correct": int(np.sum(self.correct)),
            "num_robust": int(np.sum(self.robust)),
            "candidates_evaluated": sum(len(c) for c in self.candidates)}


@dataclasses.dataclass(frozen=True)
class Matches:
  """The windows of the original string where one transformation T_k applies.

  Attributes:
    starts: int (P,), window start of each pick.
    replacement_ids: int (P, t_k), vocabulary ids of each pick's replacement.
    replacements: the P replacements.
  """

  starts: np.ndarray
  replacement_ids: np.ndarray
  replacements: tuple[Tokens, ...]


@dataclasses.dataclass
class _Member:
  """A beam member and the layout of its picks over the original positions.

  Attributes:
    candidate: the candidate.
    covered: int (n+1,), number of original positions before i covered by a pick.
    positions: int (n,), current position of each original position (unused where covered).
    expanded: expanded for the current transformation already.
  """

  candidate: HotFlipCandidate
  covered: np.ndarray
  positions: np.ndarray
  expanded: bool = False

  @property
  def key(self) -> Tokens:
    return self.candidate.tokens


def _member(space: Space, x: Tokens, picks: tuple[Pick, ...], score: float) -> _Member:
  """The member applying ``picks`` (sorted by start, non-overlapping) to ``x``."""
  n = len(x)
  covered = np.zeros(n + 1, np.int64)
  growth = np.zeros(n + 1, np.int64)
  tokens, i = [], 0
  for pick in picks:
    t = space.transformations[pick.transformation]
    covered[pick.start + 1:pick.start + t.s + 1] = 1
    growth[pick.start + t.s] += t.t - t.s
    tokens += x[i:pick.start] + pick.replacement
    i = pick.start + t.s
  tokens += x[i:]
  positions = np.arange(n) + np.cumsum(growth)[:n]
  return _Member(HotFlipCandidate(tuple(tokens), score, picks), np.cumsum(covered), positions)


def matches(space: Space, x: Tokens, vocab: Mapping[str, int]) -> list[Matches]:
  """Picks of every transformation on ``x`` (the space restricted to ``vocab``)."""
  windows = space.windows(x)
  out = []
  for k, t in enumerate(space.transformations):
    starts, replacements = [], []
    for i, per_k in enumerate(windows):
      starts += [i] * len(per_k[k])
      replacements += per_k[k]
    ids = np.array([[vocab[w] for w in r] for r in replacements], np.int64).reshape(len(replacements), t.t)
    out.append(Matches(np.array(starts, np.int64), ids, tuple(replacements)))
  return out


def _suffix_sums(values: jax.Array) -> jax.Array:
  """(R, N) → (R, N + 1): entry q is Σ_{p ≥ q} values[:, p] (0 at q = N)."""
  sums = jnp.cumsum(values[:, ::-1], axis=1)[:, ::-1]
  return jnp.pad(sums, ((0, 0), (0, 1)))


def _diagonal(dots: jax.Array, shift: jax.Array) -> jax.Array:
  """(R, N, N) → (R, N): entry p is dots[:, p, p + shift] (0 where p + shift is outside)."""
  n = dots.shape[-1]
  columns = jnp.arange(n) + shift
  inside = (columns >= 0) & (columns < n)
  picked = jnp.take_along_axis(dots, jnp.clip(columns, 0, n - 1)[None, :, None], axis=2)
  return jnp.where(inside[None, :], picked[..., 0], 0.0)


@functools.partial(jax.jit, static_argnums=0)
def _first_order_terms(graphdef: nnx.GraphDef, state: nnx.State, shift: jax.Array,
                       token_ids: jax.Array, lengths: jax.Array, labels: jax.Array
                       ) -> tuple[jax.Array, jax.Array, jax.Array]:
  """Gradients and suffix sums that score every rewrite with s_k − t_k = ``shift``.

  Args:
    graphdef, state: the model.
    shift: int scalar, s_k − t_k of the transformation of this round.
    token_ids: int (R, N) current strings, padded.
    lengths: int (R,) their lengths (0 for padding rows).
    labels: int (R,) the labels.

  Returns:
    ``grads`` (R, N, E) = ∇_e L at each position (0 beyond the length), ``old`` (R, N + 1) with
    ``old[r, q] = Σ_{p ≥ q} grads[r, p] · e(cur[p])`` and ``shifted`` (R, N + 1) with
    ``shifted[r, q] = Σ_{p ≥ q} grads[r, p] · e(cur[p + shift])`` (zero vectors beyond the
    length).
  """
  model = nnx.merge(graphdef, state)
  real = jnp.arange(token_ids.shape[1])[None, :] < lengths[:, None]
  embedded = model.embed(token_ids) * real[..., None]

  def loss(e):
    log_probs = jax.nn.log_softmax(model.head(model.features_from_embeddings(e, lengths)))
    return -jnp.sum(jnp.take_along_axis(log_probs, labels[:, None], axis=1))

  grads = jax.grad(loss)(embedded)
  dots = jnp.einsum("rpe,rqe->rpq", grads, embedded)
  return grads, _suffix_sums(_diagonal(dots, 0)), _suffix_sums(_diagonal(dots, shift))


@dataclasses.dataclass(frozen=True)
class Devices:
  """Where the attack's jitted calls run: the default device (``mesh`` None), or every device of
  ``mesh`` with the rows of each call split over them (the state replicated). Every host runs
  the same search on the same sentences and gathers every call's outputs."""

  mesh: Mesh | None = None

  def rows(self, count: int) -> int:
    """``count`` rounded up to a multiple of the devices (the extra rows are padding)."""
    devices = 1 if self.mesh is None else self.mesh.size
    return -(-count // devices) * devices

  def state(self, state: nnx.State) -> nnx.State:
    """``state`` replicated on the mesh (as it is if it already is: a training step's)."""
    if self.mesh is None:
      return state
    sharding = parallel.replicated(self.mesh)
    if all(isinstance(x, jax.Array) and x.sharding.is_equivalent_to(sharding, x.ndim)
           for x in jax.tree.leaves(state)):
      return state
    return parallel.put(state, sharding)

  def put_rows(self, *arrays: np.ndarray):
    return arrays if self.mesh is None else parallel.put(arrays, parallel.batch_sharded(self.mesh))

  def put_trees(self, trees):
    """A :class:`~arc_jax.perturbation.trees.TreeBatch` split by rows (``parallel.put_trees``)."""
    return trees if self.mesh is None else parallel.put_trees(trees, self.mesh)

  def fetch(self, tree):
    if self.mesh is None:
      return jax.device_get(tree)
    return multihost_utils.process_allgather(tree, tiled=True)


def merged(graphdef: nnx.GraphDef, state) -> tuple[nnx.GraphDef, nnx.State]:
  """(graphdef, one state) from a state or a tuple of states (e.g. ``(params, rest)``)."""
  if isinstance(state, tuple):
    return nnx.split(nnx.merge(graphdef, *state))
  return graphdef, state


def _pad_rows(rows: Sequence[Tokens], vocab: Mapping[str, int], count: int
              ) -> tuple[np.ndarray, np.ndarray]:
  """(int32 (count, N) ids, int32 (count,) lengths), N a length bucket."""
  width = bucket(max([len(r) for r in rows] + [1]), LENGTH_BUCKETS)
  ids = np.zeros((count, width), np.int32)
  lengths = np.zeros((count,), np.int32)
  for b, row in enumerate(rows):
    ids[b, :len(row)] = [vocab[w] for w in row]
    lengths[b] = len(row)
  return ids, lengths


class BeamSearch:
  """The beam searches of one chunk of examples, advanced together round by round.

  The search of the module docstring for any kind of example: for each (T_k, δ_k), δ_k rounds;
  a round expands every member not yet expanded for T_k by each pick it can still take
  (:meth:`available`), scores all children of the chunk at once (:meth:`scores`: one jitted
  call) and keeps, per example, the ``beam`` best distinct members (:meth:`select`). Subclasses
  supply the three methods and :meth:`child`; members need ``candidate`` (with ``score``),
  ``key`` (what makes two members the same) and ``expanded``.
  """

  def __init__(self, budgets: Sequence[int], beams: list[list], beam: int):
    self.budgets, self.beams, self.beam = tuple(budgets), beams, beam

  def run(self) -> list[tuple]:
    """Per example, the candidates of its final beam, best score first."""
    for k, delta in enumerate(self.budgets):
      for members in self.beams:
        for m in members:
          m.expanded = False
      for _ in range(delta):
        if not self._round(k):
          break
    return [tuple(m.candidate for m in members) for members in self.beams]

  def available(self, j: int, m, k: int) -> np.ndarray:
    """bool (P,): which picks of T_k on example j member ``m`` can still take."""
    raise NotImplementedError

  def scores(self, k: int, todo: list[tuple[int, Any, np.ndarray]]) -> np.ndarray:
    """Scores of every child of a round, flat in the order of ``todo`` ((example, member,
    pick indices) per expanded member): parent score plus the first-order gain."""
    raise NotImplementedError

  def child(self, j: int, k: int, parent, p: int, score: float):
    """The member that adds pick p of T_k to ``parent`` (example j), with ``score``."""
    raise NotImplementedError

  def _round(self, k: int) -> bool:
    """Expands every unexpanded member by T_k; False if no member had a pick to try."""
    todo = []
    for j, members in enumerate(self.beams):
      for m in members:
        if not m.expanded:
          m.expanded = True
          available = self.available(j, m, k)
          if available.any():
            todo.append((j, m, np.flatnonzero(available)))
    if not todo:
      return False
    scores = self.scores(k, todo)
    first = np.cumsum([0] + [len(p) for _, _, p in todo])
    children: dict[int, list] = {}
    for r, (j, m, p) in enumerate(todo):
      children.setdefault(j, []).append((m, p, scores[first[r]:first[r + 1]]))
    for j, expansions in children.items():
      self.beams[j] = self.select(j, k, expansions)
    return True

  def select(self, j: int, k: int, expansions: list) -> list:
    """The ``beam`` best distinct members among the current members and their children."""
    members = self.beams[j]
    specs = [(m, pick) for m, picks, _ in expansions for pick in picks]
    scores = np.concatenate([[m.candidate.score for m in members]]
                            + [s for _, _, s in expansions])
    kept, seen = [], set()
    for o in np.argsort(-scores, kind="stable"):
      if o < len(members):
        member = members[o]
      else:
        parent, pick = specs[o - len(members)]
        member = self.child(j, k, parent, pick, float(scores[o]))
      if member.key not in seen:
        seen.add(member.key)
        kept.append(member)
        if len(kept) == self.beam:
          break
    return kept


class _Search(BeamSearch):
  """The beam searches of one chunk of sentences."""

  def __init__(self, graphdef, state, space: Space, sentences: Sequence[Tokens],
               labels: np.ndarray, vocab: Mapping[str, int], embeddings: np.ndarray, beam: int,
               rows: int, devices: Devices):
    self.graphdef, self.state, self.space, self.vocab = graphdef, state, space, vocab
    self.sentences, self.labels, self.embeddings = sentences, labels, embeddings
    self.rows, self.devices = rows, devices
    self.matches = [matches(space, x, vocab) for x in sentences]
    super().__init__(space.budgets, [[_member(space, x, (), 0.0)] for x in sentences], beam)

  def available(self, j: int, m: _Member, k: int) -> np.ndarray:
    starts, s = self.matches[j][k].starts, self.space.transformations[k].s
    return m.covered[starts + s] == m.covered[starts]

  def scores(self, k: int, todo: list) -> np.ndarray:
    t = self.space.transformations[k]
    ids, lengths = _pad_rows([m.candidate.tokens for _, m, _ in todo], self.vocab, self.rows)
    labels = np.zeros((self.rows,), np.int32)
    labels[:len(todo)] = [self.labels[j] for j, _, _ in todo]
    grads, old, shifted = self.devices.fetch(_first_order_terms(
        self.graphdef, self.state, np.int32(t.s - t.t),
        *self.devices.put_rows(ids, lengths, labels)))

    # Every (member, pick) pair of the round, flattened.
    row = np.concatenate([np.full(len(p), r) for r, (_, _, p) in enumerate(todo)])
    at = np.concatenate([m.positions[self.matches[j][k].starts[p]] for j, m, p in todo])
    replacement_ids = np.concatenate([self.matches[j][k].replacement_ids[p] for j, _, p in todo])
    parent = np.array([m.candidate.score for _, m, _ in todo])[row]
    # Positions p ≥ at + t_k hold the old tokens shifted by s_k − t_k: a difference of suffix
    # sums. The t_k replaced positions (cut at the old length): gathered differences.
    tail = np.minimum(at + t.t, ids.shape[1])
    gain = shifted[row, tail] - old[row, tail]
    if t.t:
      spots = at[:, None] + np.arange(t.t)[None, :]
      inside = spots < lengths[row][:, None]
      spots = np.minimum(spots, ids.shape[1] - 1)
      diff = self.embeddings[replacement_ids] - self.embeddings[ids[row[:, None], spots]]
      gain += np.sum(np.einsum("qje,qje->qj", grads[row[:, None], spots], diff) * inside, axis=1)
    return parent + gain

  def child(self, j: int, k: int, parent: _Member, p: int, score: float) -> _Member:
    found = self.matches[j][k]
    pick = Pick(int(found.starts[p]), k, found.replacements[p])
    picks = tuple(sorted(parent.candidate.picks + (pick,), key=lambda q: q.start))
    return _member(self.space, self.sentences[j], picks, score)


def check_search_settings(beam: int, batch_size: int) -> None:
  if beam < 1:
    raise ValueError(f"beam must be >= 1, got {beam}.")
  if batch_size < 1:
    raise ValueError(f"batch_size must be >= 1, got {batch_size}.")


def search_in_chunks(sizes: Sequence[int], batch_size: int, progress: bool,
                     search: Callable[[np.ndarray], BeamSearch]) -> list[tuple]:
  """Runs ``search(indices)`` on chunks of ``batch_size`` examples sorted by size (so each
  chunk's rows pad to a small bucket); per example, its candidates."""
  order = np.argsort(sizes, kind="stable")
  out: list[tuple] = [()] * len(sizes)
  with tqdm(total=len(sizes), unit="example", desc="hotflip", disable=not progress) as bar:
    for start in range(0, len(order), batch_size):
      chunk = order[start:start + batch_size]
      for i, found in zip(chunk, search(chunk).run()):
        out[i] = found
      bar.update(len(chunk))
  return out


def robustness(examples: Sequence, labels: np.ndarray, classify: Callable[[list], np.ndarray],
               attack: Callable[[np.ndarray], list[Sequence]]) -> HotFlipResult:
  """HF Acc of any kind of example: robust iff x and every candidate of ``attack`` are
  classified as the label; examples whose clean prediction is wrong are not attacked.

  Args:
    examples: the n examples.
    labels: int (n,).
    classify: predicted classes of a list of members.
    attack: ``attack(indices)`` → per index, its candidates (members of S(x)).
  """
  correct = classify(list(examples)) == labels
  attacked = np.flatnonzero(correct)
  candidates: list[tuple] = [()] * len(examples)
  for i, found in zip(attacked, attack(attacked)):
    candidates[i] = tuple(found)
  flat = [s for found in candidates for s in found]
  owner = np.repeat(np.arange(len(examples)), [len(c) for c in candidates]).astype(np.int64)
  wrong = classify(flat) != labels[owner]
  robust = correct.copy()
  robust[owner[wrong]] = False
  counterexamples: list = [None] * len(examples)
  for q in np.flatnonzero(wrong)[::-1]:  # the best-ranked one is written last
    counterexamples[owner[q]] = flat[q]
  return HotFlipResult(correct, robust, tuple(candidates), tuple(counterexamples))


def _check_inputs(sentences: Sequence[Tokens], labels: np.ndarray, vocab: Mapping[str, int],
                  beam: int, batch_size: int) -> None:
  check_search_settings(beam, batch_size)
  if len(sentences) != len(labels):
    raise ValueError(f"Got {len(sentences)} sentences and {len(labels)} labels; pass one label "
                     "per sentence.")
  check_vocabulary(sentences, vocab)


def hotflip_search(graphdef: nnx.GraphDef, state, space: Space,
                   sentences: Sequence[Sequence[str]], labels: Sequence[int],
                   vocab: Mapping[str, int], *, beam: int = 5, batch_size: int = 32,
                   progress: bool = False, mesh: Mesh | None = None
                   ) -> list[tuple[HotFlipCandidate, ...]]:
  """HotFlip beam search on n sentences (see the module docstring).

  Args:
    graphdef, state: ``nnx.split(model)`` of an :class:`~arc_jax.nn.LSTMClassifier`; ``state``
      may also be a tuple of states, e.g. ``(params, rest)``.
    space: the perturbation space; restricted to ``vocab`` here.
    sentences: n tokenised sentences, every token in ``vocab``.
    labels: (n,) labels: the loss whose increase is estimated.
    vocab: word → id (0 = padding).
    beam: beam width (5 for HF Acc, 1 for adversarial training).
    batch_size: sentences searched together; each gradient call has ``batch_size · beam`` rows.
    progress: tqdm bar over sentences.
    mesh: split each gradient call's rows over these devices (``arc_jax.parallel``; padded to
      a multiple of them); None: the default device. The candidates do not depend on it.

  Returns:
    Per sentence, up to ``beam`` candidates with distinct strings, best score first; x itself
    is among them while no child outscores it.
  """
  sentences = [tuple(s) for s in sentences]
  labels = np.asarray(labels, np.int64).reshape(-1)
  _check_inputs(sentences, labels, vocab, beam, batch_size)
  graphdef, state = merged(graphdef, state)
  space = space.restricted_to(vocab)
  embeddings = np.asarray(nnx.merge(graphdef, state).embeddings[...])
  devices = Devices(mesh)
  state = devices.state(state)
  rows = devices.rows(batch_size * beam)
  return search_in_chunks(
      [len(s) for s in sentences], batch_size, progress,
      lambda chunk: _Search(graphdef, state, space, [sentences[i] for i in chunk], labels[chunk],
                            vocab, embeddings, beam, rows, devices))


def hotflip_candidates(graphdef: nnx.GraphDef, state, space: Space,
                       sentences: Sequence[Sequence[str]], labels: Sequence[int],
                       vocab: Mapping[str, int], *, beam: int = 5, batch_size: int = 32,
                       progress: bool = False, mesh: Mesh | None = None) -> list[list[Tokens]]:
  """The strings of :func:`hotflip_search`: per sentence up to ``beam`` distinct members of S(x)."""
  found = hotflip_search(graphdef, state, space, sentences, labels, vocab, beam=beam,
                         batch_size=batch_size, progress=progress, mesh=mesh)
  return [[c.tokens for c in candidates] for candidates in found]


def adversarial_examples(graphdef: nnx.GraphDef, state, space: Space,
                         sentences: Sequence[Sequence[str]], labels: Sequence[int],
                         vocab: Mapping[str, int], *, batch_size: int = 32,
                         mesh: Mesh | None = None) -> list[Tokens]:
  """HotFlip adversarial training's extra rows: the top-1 (beam 1) candidate of each sentence.

  As in the original, a sentence whose every child scores below 0 comes back unchanged.
  """
  found = hotflip_search(graphdef, state, space, sentences, labels, vocab, beam=1,
                         batch_size=batch_size, mesh=mesh)
  return [candidates[0].tokens for candidates in found]


def _predicted(graphdef: nnx.GraphDef, state: nnx.State, strings: Sequence[Tokens],
               vocab: Mapping[str, int], rows: int, devices: Devices) -> np.ndarray:
  """Predicted class (len(strings),) of each string, in batches of ``rows`` sorted by length."""
  order = np.argsort([len(s) for s in strings], kind="stable")
  out = np.zeros(len(strings), np.int64)
  for start in range(0, len(order), rows):
    idx = order[start:start + rows]
    batch = make_batch([strings[i] for i in idx], np.zeros(len(idx), np.int64),
                       range(len(idx)), vocab, rows)
    logits = devices.fetch(predict(graphdef, state,
                                   *devices.put_rows(batch.token_ids, batch.lengths)))
    out[idx] = np.argmax(logits[:len(idx)], axis=-1)
  return out


def hotflip_robustness(graphdef: nnx.GraphDef, state, space: Space,
                       sentences: Sequence[Sequence[str]], labels: Sequence[int],
                       vocab: Mapping[str, int], *, beam: int = 5, batch_size: int = 32,
                       progress: bool = False, mesh: Mesh | None = None) -> HotFlipResult:
  """HF Acc (docs/ORIGINAL.md §6): robust iff x and all ``beam`` HotFlip candidates are classified y.

  Examples whose clean prediction is wrong are not attacked. The candidates are members of
  S(x), so HF Acc ≥ EX Acc; it is ≤ Acc by definition.

  Args:
    graphdef, state, space, sentences, labels, vocab, beam, batch_size, progress, mesh: as for
      :func:`hotflip_search`; predictions use ``batch_size · beam`` rows per call.

  Returns:
    A :class:`HotFlipResult`.
  """
  sentences = [tuple(s) for s in sentences]
  labels = np.asarray(labels, np.int64).reshape(-1)
  _check_inputs(sentences, labels, vocab, beam, batch_size)
  graphdef, state = merged(graphdef, state)
  devices = Devices(mesh)
  rows = devices.rows(batch_size * beam)
  placed = devices.state(state)
  return robustness(
      sentences, labels,
      lambda strings: _predicted(graphdef, placed, strings, vocab, rows, devices),
      lambda attacked: hotflip_candidates(
          graphdef, state, space, [sentences[i] for i in attacked], labels[attacked], vocab,
          beam=beam, batch_size=batch_size, progress=progress, mesh=mesh))
