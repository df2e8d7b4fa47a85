"""Random members of S(x) (strings) and S(t) (trees) for the data-augmentation baseline
(docs/ALGORITHM.md §7).

Sampling is uniform over *application choices* (sets of non-overlapping (window,
transformation, replacement) picks within the budgets, see :mod:`arc_jax.perturbation.spaces`),
not over distinct strings: a string that several choices produce is drawn proportionally more
often, and x itself has the weight of the empty choice. The original draws instead by a random
beam-1 walk with random scores (docs/ORIGINAL.md §5), whose distribution depends on the spec order
and favours strings reachable in few steps; uniform choices are well defined and order-free.

Method: a counting DP keeps, per start position i and remaining budget vector c, the number
W[i][c] of choices on tokens[i:] using at most c_k applications of each T_k (Python ints, exact
at any size). One uniform integer u < W[0][δ] then indexes a choice, decoded position by position
in mixed radix: keep token i (the first W[i+1][c] indices) or apply T_k with one of its
replacements (a block of |f_k| · W[i+s_k][c−e_k] indices per k).
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

from arc_jax.data.trees import Tree
from arc_jax.perturbation.spaces import Space, Tokens
from arc_jax.perturbation.trees import TreeSpace, leaf_result, rewrite_leaves


@dataclasses.dataclass(frozen=True)
class _ChoiceCounts:
  """The counting DP of one sentence.

  Attributes:
    tokens: the sentence.
    windows: ``Space.windows(tokens)``: ``windows[i][k]`` = replacements of T_k at position i.
    spent: ``spent[k][r]`` = row of ``dec - e_k`` for budget row r (-1 where c_k = 0).
    ways: ``ways[i][r]`` = choices on tokens[i:] within remaining budget row r, i = 0..n.
  """

  tokens: Tokens
  windows: list[list[tuple[Tokens, ...]]]
  spent: list[list[int]]
  ways: list[list[int]]

  @property
  def total(self) -> int:
    """Number of application choices of the whole sentence (the last row is the full δ)."""
    return self.ways[0][-1]


def _choice_counts(space: Space, tokens: Sequence[str]) -> _ChoiceCounts:
  """Suffix counts W[i][c] of application choices: O(n · C · m) Python-int additions."""
  tokens = tuple(tokens)
  dec = [tuple(c) for c in space.decomposition()]
  index = {c: r for r, c in enumerate(dec)}
  spent = [[index[c[:k] + (c[k] - 1,) + c[k + 1:]] if c[k] else -1 for c in dec]
           for k in range(len(space.budgets))]
  windows = space.windows(tokens)
  n = len(tokens)
  ways = [[1] * len(dec) for _ in range(n + 1)]
  for i in range(n - 1, -1, -1):
    row = list(ways[i + 1])
    for k, t in enumerate(space.transformations):
      if windows[i][k]:
        for r in range(len(dec)):
          if spent[k][r] >= 0:
            row[r] += len(windows[i][k]) * ways[i + t.s][spent[k][r]]
    ways[i] = row
  return _ChoiceCounts(tokens, windows, spent, ways)


def _uniform_below(rng: np.random.Generator, bound: int) -> int:
  """A uniform integer in [0, bound) for a Python int of any size (rejection on random bits)."""
  bits = bound.bit_length()
  words = -(-bits // 32)
  while True:
    value = 0
    for w in rng.integers(0, 1 << 32, size=words, dtype=np.uint64):
      value = (value << 32) | int(w)
    value >>= 32 * words - bits
    if value < bound:
      return value


def _decode_pieces(space: Space, counts: _ChoiceCounts, u: int) -> list[tuple[int | None, Tokens]]:
  """The application choice with index ``u`` in [0, counts.total), left to right: one
  ``(k, tokens written)`` per kept token (k = None) or applied T_k (its window's replacement)."""
  out: list[tuple[int | None, Tokens]] = []
  i, r = 0, len(counts.ways[0]) - 1
  n = len(counts.tokens)
  while i < n:
    keep = counts.ways[i + 1][r]
    if u < keep:
      out.append((None, counts.tokens[i:i + 1]))
      i += 1
      continue
    u -= keep
    for k, t in enumerate(space.transformations):
      replacements, rest = counts.windows[i][k], counts.spent[k][r]
      if not replacements or rest < 0:
        continue
      per_replacement = counts.ways[i + t.s][rest]
      block = len(replacements) * per_replacement
      if u < block:
        out.append((k, replacements[u // per_replacement]))
        u %= per_replacement
        i, r = i + t.s, rest
        break
      u -= block
  return out


def _decode(space: Space, counts: _ChoiceCounts, u: int) -> Tokens:
  """The string of the application choice with index ``u`` in [0, counts.total)."""
  return tuple(w for _, piece in _decode_pieces(space, counts, u) for w in piece)


def sample_member(space: Space, tokens: Sequence[str], rng: np.random.Generator) -> Tokens:
  """A random string of S(tokens), uniform over application choices (not distinct strings).

  Every application choice (x itself is the empty one) has probability 1 / ``space.count(x)``,
  so a string is drawn with probability (#choices giving it) / (#choices). This differs from the
  original's random beam walk (docs/ORIGINAL.md §5); see the module docstring.

  Args:
    space: the perturbation space; restrict it to the model's vocabulary
      (``space.restricted_to(vocab)``) to get in-vocabulary samples.
    tokens: the sentence x.
    rng: the source of randomness; the sample is a function of its state.

  Returns:
    The sampled string as a token tuple.
  """
  counts = _choice_counts(space, tokens)
  return _decode(space, counts, _uniform_below(rng, counts.total))


def augment_batch(space: Space, sentences: Sequence[Sequence[str]], rng: np.random.Generator,
                  n_per_sentence: int = 1) -> list[Tokens]:
  """``n_per_sentence`` independent samples (see :func:`sample_member`) of each sentence.

  Args:
    space: the perturbation space (restricted to the vocabulary, see :func:`sample_member`).
    sentences: n sentences.
    rng: the source of randomness; the result is a function of its state.
    n_per_sentence: samples per sentence.

  Returns:
    n · n_per_sentence token tuples, sentence-major: entry ``i * n_per_sentence + j`` is the
    j-th sample of sentence i (labels: ``np.repeat(labels, n_per_sentence)``).
  """
  if n_per_sentence < 1:
    raise ValueError(f"n_per_sentence must be >= 1, got {n_per_sentence}.")
  out = []
  for sentence in sentences:
    counts = _choice_counts(space, sentence)
    out += [_decode(space, counts, _uniform_below(rng, counts.total))
            for _ in range(n_per_sentence)]
  return out


def sample_tree_member(space: TreeSpace, tree: Tree, rng: np.random.Generator) -> Tree:
  """A random tree of S(tree), uniform over its application choices, with node labels.

  Tree rewrites are 1-token transformations, so the application choices of a tree are those of
  the string of its leaves under ``space.space`` (at most one rewrite per leaf, within the
  budgets), less the one that deletes every leaf (no tree): a choice is drawn as for strings
  (:func:`sample_member`) and redrawn in that one case, which keeps the draw uniform over the
  others. The labels carry over as :func:`~arc_jax.perturbation.trees.rewrite_leaves` describes
  (the root keeps the tree's label).

  Args:
    space: the tree space (restricted to the vocabulary, see :func:`sample_member`).
    tree: the tree t.
    rng: the source of randomness; the sample is a function of its state.
  """
  counts = _choice_counts(space.space, tree.tokens)
  while True:
    pieces = _decode_pieces(space.space, counts, _uniform_below(rng, counts.total))
    leaves = [word if k is None else leaf_result(space.kinds[k], piece)
              for word, (k, piece) in zip(tree.tokens, pieces)]
    member = rewrite_leaves(tree, leaves)
    if member is not None:
      return member
