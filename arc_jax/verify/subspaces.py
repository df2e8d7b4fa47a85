"""Sub-spaces of S(x) for the complete verifier: constrained application choices, split exactly.

An *application choice* of S(x) (:mod:`arc_jax.perturbation.spaces`) is a set of non-overlapping
picks (i, k, r): T_k applied at the window x[i .. i+s_k-1] with its replacement r, at most δ_k
picks of each T_k. A :class:`SubSpace` is the set of choices allowed by two constraints:

* ``allowed[i][k]``: the replacements T_k may write at the window starting at i (a subset of
  f_k(x[i .. i+s_k-1]); empty: T_k is not applied there);
* ``keep[i]``: whether token i may be left unchanged (False: some pick must cover position i).

The full space is every replacement allowed and every token keepable. These are exactly the
constraints the certification DP honours (``Plan.match``, ``Plan.replacement_mask`` and
``Plan.keep``, see :func:`lower`): the DP's soundness argument (docs/ALGORITHM.md §2) goes through with
the branches restricted, so the DP bounds every string of a sub-space.

Split at a window (i, k) (:func:`split`), for a node P with f = ``allowed[i][k]`` non-empty and
every token of the window keepable (the window is not already forced):

* ``skip``  = P with ``allowed[i][k] = ∅``;
* ``apply(R)`` for each block R of a partition of f = P with ``allowed[i][k] = R``, ``keep`` False
  on the window's tokens and ``allowed[i'][k'] = ∅`` for every other (i', k') whose window
  overlaps [i, i+s_k-1].

Claim: the children are pairwise disjoint and their union is P (as sets of choices).
Proof. Let c ∈ P. If c has no pick at (i, k), every constraint of ``skip`` holds for c, and
``apply(R)`` requires a pick at (i, k) (below), so c is in ``skip`` only. Otherwise c picks
(i, k, r) with r ∈ f, so r lies in exactly one block R; the picks of c do not overlap, so c picks
nothing at the windows overlapping (i, k) and keeps none of the window's tokens: c ∈ apply(R), and
c ∉ skip, c ∉ apply(R') for R' ≠ R. Conversely a choice c of apply(R) keeps none of the window's
tokens, so each of them is covered by some pick of c whose window overlaps [i, i+s_k-1]; the only
such window still allowed is (i, k) itself, so c picks (i, k, r) with r ∈ R; and c satisfies
every constraint of P (each child only removes options), so c ∈ P. □

Different choices may write the same string (e.g. duplicating either of two equal adjacent
tokens), so children are disjoint as choices, not always as strings; verification needs only
that their strings cover P's, which the partition of choices gives.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
from typing import Iterator, Mapping, Sequence

import numpy as np

from arc_jax.attacks.augmentation import _uniform_below
from arc_jax.perturbation.plans import Plan, TransformationPlan
from arc_jax.perturbation.spaces import Space, Tokens

Pick = tuple[int, int, Tokens]
"""(i, k, r): T_k applied at the window starting at token i, writing the replacement r."""


@dataclasses.dataclass(frozen=True)
class SubSpace:
  """A set of application choices of S(x) (see the module docstring).

  Attributes:
    allowed: ``allowed[i][k]``: replacements of T_k allowed at the window starting at i.
    keep: ``keep[i]``: token i may stay unchanged.
    forced: the windows (i, k) this node forces, in the order they were split (for the proof).
    skipped: the windows (i, k) this node excludes by splitting.
  """

  allowed: tuple[tuple[tuple[Tokens, ...], ...], ...]
  keep: tuple[bool, ...]
  forced: tuple[tuple[int, int], ...] = ()
  skipped: tuple[tuple[int, int], ...] = ()

  def describe(self, space: Space) -> dict:
    """JSON-ready path of this node: the windows forced (with their replacements) and skipped."""
    name = lambda k: space.transformations[k].name
    return {"forced": [[i, name(k), [list(r) for r in self.allowed[i][k]]] for i, k in self.forced],
            "skipped": [[i, name(k)] for i, k in self.skipped]}


def full(space: Space, tokens: Sequence[str]) -> SubSpace:
  """S(x) itself as a :class:`SubSpace`."""
  tokens = tuple(tokens)
  return SubSpace(tuple(tuple(w) for w in space.windows(tokens)), (True,) * len(tokens))


def _suffix_counts(space: Space, node: SubSpace) -> tuple[list[list[int]], list[tuple[int, ...]]]:
  """ways[i][r]: choices of ``node`` on tokens i.. using at most dec[r] applications (exact ints).

  The counting DP of ``Space.count`` with the node's constraints: the "keep" term only where
  ``keep[i]``, the T_k terms with ``len(allowed[i][k])`` replacements.
  """
  dec = [tuple(c) for c in space.decomposition()]
  index = {c: r for r, c in enumerate(dec)}
  n = len(node.keep)
  ways = [[0] * len(dec) for _ in range(n + 1)]
  ways[n] = [1] * len(dec)
  for i in range(n - 1, -1, -1):
    row = list(ways[i + 1]) if node.keep[i] else [0] * len(dec)
    for k, t in enumerate(space.transformations):
      f = node.allowed[i][k]
      if not f or i + t.s > n:
        continue
      for r, c in enumerate(dec):
        if c[k]:
          row[r] += len(f) * ways[i + t.s][index[c[:k] + (c[k] - 1,) + c[k + 1:]]]
    ways[i] = row
  return ways, dec


def count(space: Space, node: SubSpace) -> int:
  """The exact number of application choices in ``node`` (a Python int)."""
  return _suffix_counts(space, node)[0][0][-1]


def choices(space: Space, node: SubSpace) -> Iterator[tuple[Pick, ...]]:
  """Every application choice of ``node``, as a tuple of picks in window order.

  A choice is built pick by pick: from the end i of the last pick, the next pick (j, k, r) may
  start at any j ≥ i where T_k (with budget left) may start, up to the first position f ≥ i
  whose token may not be kept (it must be covered by then); the picks so far are a choice of
  their own when no such f remains. A pick is taken only if the rest of the string still has
  a choice with the budget left (the counting DP, :func:`_suffix_counts`), so every node of
  this walk (an explicit stack: nested generators would pass each choice up through one frame
  per pick) is a choice or leads to one, and the work is proportional to the choices, not to
  their length.
  """
  n = len(node.keep)
  ts = space.transformations
  ways, dec = _suffix_counts(space, node)
  index = {c: r for r, c in enumerate(dec)}
  forced = [n] * (n + 1)  # forced[i]: the first position >= i that may not be kept
  for i in range(n - 1, -1, -1):
    forced[i] = forced[i + 1] if node.keep[i] else i
  starts = [[j for j in range(n) if node.allowed[j][k] and j + t.s <= n]
            for k, t in enumerate(ts)]
  stack = [(0, tuple(space.budgets), ())] if ways[0][-1] else []
  while stack:
    i, budget, picks = stack.pop()
    if forced[i] == n:
      yield picks
    children = []
    for k, t in enumerate(ts):
      if not budget[k]:
        continue
      rest = budget[:k] + (budget[k] - 1,) + budget[k + 1:]
      left = index[rest]
      for j in itertools.takewhile(lambda j: j <= forced[i],
                                   starts[k][bisect.bisect_left(starts[k], i):]):
        if ways[j + t.s][left]:
          children += [(j + t.s, rest, picks + ((j, k, r),)) for r in node.allowed[j][k]]
    stack += reversed(children)


def write(tokens: Sequence[str], picks: Sequence[Pick], space: Space) -> Tokens:
  """The string an application choice writes."""
  out, i = [], 0
  for j, k, r in picks:
    out += tokens[i:j]
    out += r
    i = j + space.transformations[k].s
  return tuple(out) + tuple(tokens[i:])


def members(space: Space, tokens: Sequence[str], node: SubSpace) -> Iterator[Tokens]:
  """The distinct strings of ``node``."""
  seen = set()
  for picks in choices(space, node):
    s = write(tokens, picks, space)
    if s not in seen:
      seen.add(s)
      yield s


def samples(space: Space, tokens: Sequence[str], node: SubSpace, rng: np.random.Generator,
            count: int) -> list[Tokens]:
  """``count`` strings of ``node`` drawn independently and uniformly over its choices (none if
  the node is empty).

  Each draw is one uniform index u in [0, |node|) decoded left to right through the counting
  DP (:func:`_suffix_counts`, computed once): keep token i while u is below the choices that keep
  it, else step over them to the block of the first T_k whose choices hold u, where u // (the
  choices after the window) picks the replacement. The decoding is a bijection from indices to
  choices, so the choice is uniform.
  """
  ways, dec = _suffix_counts(space, node)
  index = {c: r for r, c in enumerate(dec)}
  n, top = len(node.keep), len(dec) - 1
  out = []
  for _ in range(count if ways[0][top] else 0):
    u, r, i, picks = _uniform_below(rng, ways[0][top]), top, 0, []
    while i < n:
      keep = ways[i + 1][r] if node.keep[i] else 0
      if u < keep:
        i += 1
        continue
      u -= keep
      for k, t in enumerate(space.transformations):
        f, c = node.allowed[i][k], dec[r]
        if not f or not c[k] or i + t.s > n:
          continue
        below = index[c[:k] + (c[k] - 1,) + c[k + 1:]]
        block = len(f) * ways[i + t.s][below]
        if u < block:
          picks.append((i, k, f[u // ways[i + t.s][below]]))
          u, i, r = u % ways[i + t.s][below], i + t.s, below
          break
        u -= block
    out.append(write(tokens, picks, space))
  return out


def splittable(space: Space, node: SubSpace) -> list[tuple[int, int]]:
  """Windows (i, k) the node may be split at: T_k allowed there and the window not forced."""
  n = len(node.keep)
  return [(i, k) for i in range(n) for k, t in enumerate(space.transformations)
          if node.allowed[i][k] and i + t.s <= n and all(node.keep[i:i + t.s])
          and space.budgets[k] > 0]


def split(space: Space, node: SubSpace, i: int, k: int, blocks: int = 1) -> list[SubSpace]:
  """The children ``skip`` and ``apply(R)`` of ``node`` at window (i, k) (module docstring).

  Args:
    blocks: the replacements f = ``allowed[i][k]`` are partitioned into ``min(blocks, |f|)``
      contiguous blocks of near-equal size, one ``apply`` child each.
  """
  if (i, k) not in splittable(space, node):
    raise ValueError(f"Window ({i}, {space.transformations[k].name}) cannot be split: it is "
                     "not allowed or already forced in this node; pick one from splittable().")
  s = space.transformations[k].s
  f = node.allowed[i][k]
  set_at = lambda rows, k_, value: rows[:k_] + (value,) + rows[k_ + 1:]
  skip_allowed = node.allowed[:i] + (set_at(node.allowed[i], k, ()),) + node.allowed[i + 1:]
  out = [SubSpace(skip_allowed, node.keep, node.forced, node.skipped + ((i, k),))]
  overlapping = [(i2, k2) for i2 in range(len(node.keep))
                 for k2, t2 in enumerate(space.transformations)
                 if i2 < i + s and i < i2 + t2.s and (i2, k2) != (i, k)]
  cleared = [list(row) for row in node.allowed]
  for i2, k2 in overlapping:
    cleared[i2][k2] = ()
  keep = tuple(False if i <= p < i + s else v for p, v in enumerate(node.keep))
  for block in np.array_split(np.arange(len(f)), min(blocks, len(f))):
    cleared[i][k] = tuple(f[b] for b in block)
    out.append(SubSpace(tuple(tuple(row) for row in cleared), keep,
                        node.forced + ((i, k),), node.skipped))
  return out


def lower(base: Plan, space: Space, vocab: Mapping[str, int], nodes: Sequence[SubSpace],
          rows: int) -> Plan:
  """The DP plan of ``nodes`` (one per row, padded to ``rows``), all sub-spaces of one sentence.

  Args:
    base: the plan of the sentence under the full space, one row (``PlanBuilder.build``).
    nodes: sub-spaces of that sentence's S(x).

  Returns:
    ``base`` repeated ``rows`` times with, in row b: ``match`` False where ``nodes[b]`` allows no
    replacement, ``replacement_mask`` restricted to the ids its allowed replacements write at
    each place, and ``keep`` = ``nodes[b].keep``. Padding rows repeat the sentence unconstrained.
  """
  if len(nodes) > rows:
    raise ValueError(f"{len(nodes)} sub-spaces do not fit in {rows} rows.")
  n_pad = base.token_ids.shape[1]
  tile = lambda a: np.repeat(np.asarray(a)[:1], rows, axis=0)
  keep = np.ones((rows, n_pad), bool)
  out = []
  for k, (t, tp) in enumerate(zip(space.transformations, base.transformations)):
    match, ids, mask = tile(tp.match), tile(tp.replacement_ids), tile(tp.replacement_mask)
    for b, node in enumerate(nodes):
      for i, row in enumerate(node.allowed):
        f = row[k]
        j = i + t.s - 1
        if not f:
          if j < n_pad:
            match[b, j] = False
          continue
        for place in range(t.t):
          written = {vocab[r[place]] for r in f}
          mask[b, j, place] &= np.isin(ids[b, j, place], list(written))
    out.append(TransformationPlan(match, ids, mask))
  for b, node in enumerate(nodes):
    keep[b, :len(node.keep)] = node.keep
  return Plan(tile(base.token_ids), tile(base.lengths), tuple(out), keep,
              distinct_words=base.distinct_words)
