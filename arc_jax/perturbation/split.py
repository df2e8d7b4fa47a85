"""A space split into an augmented part and an abstracted part (ARC-A3T, A3T; paper appendix).

ARC-A3T abstracts a chosen subset of the transformations of S = {(T_k, δ_k)} with the DP and
augments the rest: it explores S_aug(x) (the chosen-to-augment transformations with their
budgets) by enumeration or HotFlip and certifies the abstracted part on top of each member
found. The paper leaves the combination informal; here it is exact.

**Semantics.** S(x) applies its transformations at non-overlapping windows of the *original*
string x (:mod:`arc_jax.perturbation.spaces`). An application choice of S is therefore a
disjoint union A ∪ B of a choice A of S_aug (picks of augmented transformations, within their
budgets) and a choice B of S_abs whose windows avoid A's windows. A *member* x' of S_aug(x) is
the string of one choice A together with the *origin* of each of its tokens: the index in x of a
token A left untouched, −1 for a token A wrote. On a member, S_abs may only rewrite windows made
of untouched tokens that were adjacent in x (consecutive origins): exactly the windows of x that
A left free, so ``S_abs|x'`` (S_abs restricted to those windows) gives the strings of A ∪ B over
every admissible B, and

    S(x) = ⋃_{x' ∈ S_aug(x)} S_abs|x'(x')           (equality of string sets)

because budgets are per transformation and the two parts share none. Different choices A can
give the same string with different origins (deleting either of two equal stop words), so
members are distinct (string, origins) pairs, not distinct strings. Applying S_abs to x' as a
new sentence instead (the original's implementation, docs/ORIGINAL.md §5) would also rewrite
tokens that A wrote (substitute a duplicated copy) and windows that A's deletions joined:
strings outside S(x).
"""

from __future__ import annotations

import dataclasses
from typing import Iterator, Sequence

import numpy as np

from arc_jax.perturbation.spaces import Space, Tokens

WRITTEN = -1
"""Origin of a token that an augmented rewrite wrote."""


@dataclasses.dataclass(frozen=True)
class Member:
  """A member of S_aug(x) with the origin of each token (see the module docstring).

  Attributes:
    tokens: the string x'.
    origins: per token of x', its index in x, or :data:`WRITTEN`.
  """

  tokens: Tokens
  origins: tuple[int, ...]

  @staticmethod
  def of(tokens: Sequence[str]) -> Member:
    """x itself: every token untouched."""
    return Member(tuple(tokens), tuple(range(len(tokens))))

  def free_windows(self, s: int) -> np.ndarray:
    """bool (n',): whether the window of ``s`` tokens starting at each position of x' is a window
    of x that the augmented rewrites left untouched (all origins set and consecutive)."""
    origins = np.asarray(self.origins, np.int64)
    n = len(origins)
    free = np.zeros(n, bool)
    if n >= s:
      starts = np.arange(n - s + 1)
      window = origins[starts[:, None] + np.arange(s)[None, :]]
      free[:n - s + 1] = np.all(window >= 0, axis=1) & (window[:, -1] - window[:, 0] == s - 1)
    return free


def _walk(space: Space, member: Member) -> Iterator[Member]:
  """Every application choice of ``space`` on ``member``'s free windows, as members (the string
  and the origins of its tokens); one per choice, so strings may repeat."""
  tokens, origins = member.tokens, member.origins
  windows = space.windows(tokens)
  free = [member.free_windows(t.s) for t in space.transformations]

  def walk(i, budget, out, out_origins):
    if i == len(tokens):
      yield Member(out, out_origins)
      return
    yield from walk(i + 1, budget, out + tokens[i:i + 1], out_origins + origins[i:i + 1])
    for k, t in enumerate(space.transformations):
      if budget[k] and windows[i][k] and free[k][i]:
        rest = budget[:k] + (budget[k] - 1,) + budget[k + 1:]
        for r in windows[i][k]:
          yield from walk(i + t.s, rest, out + r, out_origins + (WRITTEN,) * t.t)

  yield from walk(0, tuple(space.budgets), (), ())


@dataclasses.dataclass(frozen=True)
class SplitSpace:
  """S with a subset of its transformations abstracted and the rest augmented.

  Attributes:
    space: the whole space S.
    abstracted: names of the abstracted transformations (the others are augmented).
  """

  space: Space
  abstracted: tuple[str, ...]

  def __post_init__(self):
    unknown = sorted(set(self.abstracted) - set(self.space.names))
    if unknown:
      raise ValueError(f"Cannot abstract {unknown}: not transformations of {self.space}; "
                       f"choose among {list(self.space.names)}.")

  def _part(self, abstracted: bool) -> Space:
    keep = [(t, d) for t, d in zip(self.space.transformations, self.space.budgets)
            if (t.name in self.abstracted) == abstracted]
    return Space(tuple(t for t, _ in keep), tuple(d for _, d in keep))

  @property
  def augmented(self) -> Space:
    """S_aug: the augmented transformations with their budgets, in the order of S."""
    return self._part(False)

  @property
  def abstract(self) -> Space:
    """S_abs: the abstracted transformations with their budgets, in the order of S."""
    return self._part(True)

  def members(self, tokens: Sequence[str]) -> list[Member]:
    """The distinct members of S_aug(x), x itself first (enumeration; the exploration ARC-A3T
    uses, as the paper does)."""
    seen, out = set(), []
    for m in _walk(self.augmented, Member.of(tokens)):
      if m not in seen:
        seen.add(m)
        out.append(m)
    return out

  def abstract_strings(self, member: Member) -> Iterator[Tokens]:
    """S_abs|x'(x'): the strings the abstracted part makes from ``member`` (with repeats)."""
    return (m.tokens for m in _walk(self.abstract, member))

  def enumerate(self, tokens: Sequence[str]) -> Iterator[Tokens]:
    """⋃ over the members x' of S_aug(x) of S_abs|x'(x'), each string once: S(x) itself."""
    seen = set()
    for member in self.members(tokens):
      for s in self.abstract_strings(member):
        if s not in seen:
          seen.add(s)
          yield s


def split_space(space: Space, abstracted: str | Sequence[str]) -> SplitSpace:
  """``space`` with the transformations named in ``abstracted`` (a sequence, or one string of
  comma-separated names such as ``"Del"`` or ``"Del,Sub"``) abstracted."""
  if isinstance(abstracted, str):
    abstracted = [n.strip() for n in abstracted.split(",") if n.strip()]
  return SplitSpace(space, tuple(abstracted))


def member_from_picks(space: Space, tokens: Sequence[str],
                      picks: Sequence[tuple[int, int, Tokens]]) -> Member:
  """The member of ``space``(x) applying ``picks`` (start, transformation index, replacement),
  non-overlapping windows of x in any order (e.g. a HotFlip candidate's picks)."""
  tokens = tuple(tokens)
  out, origins, i = (), (), 0
  for start, k, replacement in sorted(picks):
    out += tokens[i:start] + tuple(replacement)
    origins += tuple(range(i, start)) + (WRITTEN,) * len(replacement)
    i = start + space.transformations[k].s
  return Member(out + tokens[i:], origins + tuple(range(i, len(tokens))))
