"""String transformations T = (φ, f, s, t) of the ARC paper (§3.1), as plain data.

A transformation matches a window of ``s`` tokens (the predicate φ) and rewrites it into a set of
strings of exactly ``t`` tokens (the function f). The standard library follows the original ARC code
exactly (see docs/ORIGINAL.md §2):

=========  =====  =====================================================================
name       s→t    meaning
=========  =====  =====================================================================
Del        1→0    delete a stop word
Ins (Dup)  1→2    duplicate a token
Sub        1→1    substitute a token by one of its synonyms
Trans1     2→2    swap between "this is", "it is", "this 's", "it 's"
Trans2     2→2    swap determiner/noun pairs: {the,this,a}×{movie,film}, {the,these}×{movies,films}
Trans3     4→2    "one of the most X" / "one of the Xest" → drop "one of"
Trans4     1→2    repeat "!" or "?"
=========  =====  =====================================================================

User transformations come from two Python callables with :func:`custom`. They must not reuse a
standard name (:data:`STANDARD_NAMES`): a spec string, a training config or a results table that
says ``Ins`` means the library's Ins, so a user transformation under that name is refused where it
is made, with a one-line error asking for another name. :func:`register_transformation` makes one
usable by name in every spec string (``parse_space``, ``config.space`` for training, evaluation
and the command line; a config reaches a registering module through ``config.plugins``).
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from typing import Callable, Collection, Mapping, Sequence

Tokens = tuple[str, ...]
MatchFn = Callable[[Tokens], bool]
ReplaceFn = Callable[[Tokens], Collection[Tokens]]

STANDARD_NAMES = ("Del", "Ins", "Dup", "Sub", "Trans1", "Trans2", "Trans3", "Trans4")
"""Names reserved for the standard library (the table above)."""

NAME_PATTERN = r"[A-Za-z_][A-Za-z0-9_]*"
"""The transformation names a spec string can hold."""

REGISTERED: dict[str, Transformation] = {}
"""User transformations by name (:func:`register_transformation`), usable in every spec string."""


@dataclasses.dataclass(frozen=True)
class Transformation:
  """A string transformation T = (φ, f, s, t).

  Attributes:
    name: the name used in spec strings, e.g. ``"Sub"``.
    s: number of tokens the match predicate reads.
    t: number of tokens of every replacement.
    match: φ, a predicate over a window (tuple of ``s`` tokens).
    replace: f, maps a matched window to its replacements (each a tuple of ``t`` tokens).
      Only called on windows where ``match`` holds.
    repeats_token: s = 1 and the only replacement of (w,) is (w, …, w) (Dup, Trans4, or a user
      duplication: :func:`custom` with ``repeats_token=True``). The DP then reuses the
      unperturbed step for the first copy, and a tree space takes a 1→2 rewrite as a leaf
      duplication only when it is declared; :meth:`replacements` checks it on every window it
      sees.
    standard: made by this module's builders; only those may use a name of
      :data:`STANDARD_NAMES`.
  """

  name: str
  s: int
  t: int
  match: MatchFn = dataclasses.field(compare=False, repr=False)
  replace: ReplaceFn = dataclasses.field(compare=False, repr=False)
  repeats_token: bool = False
  standard: bool = dataclasses.field(default=False, compare=False, repr=False)

  def __post_init__(self):
    if self.name in STANDARD_NAMES and not self.standard:
      raise ValueError(f"{self.name!r} is the name of a standard transformation; give yours "
                       f"another name (e.g. 'My{self.name}').")
    if self.s < 1:
      raise ValueError(f"Transformation {self.name!r}: s must be >= 1 (got {self.s}).")
    if self.t < 0:
      raise ValueError(f"Transformation {self.name!r}: t must be >= 0 (got {self.t}).")
    if self.repeats_token and (self.s != 1 or self.t < 1):
      raise ValueError(f"Transformation {self.name!r}: repeats_token needs s = 1 and t >= 1.")

  def replacements(self, window: Sequence[str]) -> tuple[Tokens, ...]:
    """Distinct replacements of ``window`` in a fixed order; empty if φ does not hold.

    Replacements equal to the window itself are kept out: applying them changes nothing, and
    the unperturbed window is always in the space anyway.
    """
    window = tuple(window)
    if len(window) != self.s or not self.match(window):
      return ()
    out = []
    for r in self.replace(window):
      r = tuple(r)
      if len(r) != self.t:
        raise ValueError(
            f"Transformation {self.name!r} returned {r!r} for {window!r}: expected {self.t} tokens."
        )
      if r != window and r not in out:
        out.append(r)
    if self.repeats_token and out and out != [window * self.t]:
      raise ValueError(f"Transformation {self.name!r} declares repeats_token but rewrites "
                       f"{window!r} into {out!r}.")
    return tuple(out)

  def reversed(self) -> Transformation:
    """T^R: matches reversed windows and emits reversed replacements (for backward LSTMs).

    For every string x, applying T^R to reverse(x) at a window gives exactly the reversals of
    applying T to x at the mirrored window, so S^R(reverse(x)) = reverse(S(x)).
    """
    match, replace = self.match, self.replace
    return Transformation(
        name=self.name,
        s=self.s,
        t=self.t,
        match=lambda w: match(w[::-1]),
        replace=lambda w: [tuple(r)[::-1] for r in replace(w[::-1])],
        repeats_token=self.repeats_token,  # (w, …, w) reads the same both ways
        standard=self.standard,
    )

  def restricted_to(self, vocabulary: Collection[str]) -> Transformation:
    """The same transformation keeping only replacements whose tokens are all in ``vocabulary``.

    A window whose replacements are all dropped no longer matches, so that enumeration and the
    certification plans of a model with this vocabulary describe the same space.
    """
    match, replace = self.match, self.replace

    def kept(window):
      return [r for r in replace(window) if all(tok in vocabulary for tok in r)]

    return Transformation(
        name=self.name, s=self.s, t=self.t,
        match=lambda w: match(w) and bool(kept(w)),
        replace=kept,
        repeats_token=self.repeats_token,
        standard=self.standard,
    )


def custom(name: str, s: int, t: int, match: MatchFn, replace: ReplaceFn, *,
           repeats_token: bool = False) -> Transformation:
  """A user transformation from two callables over token tuples.

  Args:
    name: its name in spec strings (not one of :data:`STANDARD_NAMES`).
    s, t: the tokens it reads and the tokens of every replacement.
    match: φ, a predicate over a window (a tuple of ``s`` tokens).
    replace: f, a matched window → its replacements (tuples of ``t`` tokens).
    repeats_token: declares a duplication: s = 1, t ≥ 1 and the only replacement of (w,) is
      (w, …, w) (checked on every window, :meth:`Transformation.replacements`). Tree spaces
      (:func:`arc_jax.perturbation.trees.tree_space`) need it to take a 1→2 rewrite as a leaf
      duplication; the string DPs then reuse the unperturbed step for the first copy.

  Examples, swapping two adjacent tokens (2→2), and duplicating an adjective (1→2, usable in
  tree spaces too)::

    swap = custom("Swap", 2, 2, match=lambda w: w[0] != w[1], replace=lambda w: [(w[1], w[0])])
    twice = custom("Twice", 1, 2, match=lambda w: w[0] in {"good", "bad"},
                   replace=lambda w: [w * 2], repeats_token=True)
  """
  return Transformation(name=name, s=s, t=t, match=match, replace=replace,
                        repeats_token=repeats_token)


def register_transformation(name: str, transformation: Transformation) -> Transformation:
  """Makes ``transformation`` usable as ``name`` in every spec string, e.g. ``[(Swap,1),(Sub,2)]``
  in :func:`~arc_jax.perturbation.parse_space` and in ``config.space`` (training, evaluation,
  the command line). Returns it.

  A module that registers on import reaches training and evaluation through
  ``config.plugins`` (comma-separated module names, imported when the config is validated)::

    # mypkg/transforms.py
    register_transformation("Swap", custom("Swap", 2, 2, match=lambda w: w[0] != w[1],
                                           replace=lambda w: [(w[1], w[0])]))

  Raises:
    ValueError: ``name`` is a standard name, already registered, not a name a spec string can
      hold, or not ``transformation.name``.
  """
  call = f"register_transformation({name!r}, ...)"
  if name in STANDARD_NAMES:
    raise ValueError(f"{call}: {name!r} is the name of a standard transformation; register "
                     f"yours under another name (e.g. 'My{name}').")
  if name in REGISTERED:
    raise ValueError(f"{call}: {name!r} is already registered; register yours under another "
                     "name (or register once, when its module is first imported).")
  if not re.fullmatch(NAME_PATTERN, name):
    raise ValueError(f"{call}: a spec string cannot hold the name {name!r}; use letters, "
                     "digits and _ (not first a digit).")
  if not isinstance(transformation, Transformation) or transformation.name != name:
    raise ValueError(f"{call}: expected a Transformation named {name!r} (arc_jax.custom("
                     f"{name!r}, s, t, match, replace)), got {transformation!r}.")
  REGISTERED[name] = transformation
  return transformation


def delete_stop_words(stopwords: Collection[str]) -> Transformation:
  """Del: remove one stop word (1→0)."""
  stopwords = frozenset(stopwords)
  return Transformation("Del", 1, 0, match=lambda w: w[0] in stopwords, replace=lambda w: [()],
                        standard=True)


def duplicate(name: str = "Ins") -> Transformation:
  """Ins / Dup: repeat one token (1→2)."""
  return Transformation(name, 1, 2, match=lambda w: True, replace=lambda w: [(w[0], w[0])],
                        repeats_token=True, standard=True)


def substitute(synonyms: Mapping[str, Sequence[str]]) -> Transformation:
  """Sub: replace one token by one of its synonyms (1→1).

  Args:
    synonyms: word → candidate words. A word matches iff it has a candidate other than itself.
  """

  def candidates(w):
    return [c for c in synonyms.get(w[0], ()) if c != w[0]]

  return Transformation(
      "Sub", 1, 1,
      match=lambda w: bool(candidates(w)),
      replace=lambda w: [(c,) for c in candidates(w)],
      standard=True,
  )


def _swap_within(name: str, groups: Sequence[Collection[Tokens]]) -> Transformation:
  """A 2→2 rewrite: a pair in one of ``groups`` becomes any *other* pair of the same group."""
  groups = [tuple(g) for g in groups]

  def group_of(w):
    return next((g for g in groups if w in g), ())

  return Transformation(
      name, 2, 2,
      match=lambda w: bool(group_of(w)),
      replace=lambda w: [p for p in group_of(w) if p != w],
      standard=True,
  )


TRANS1_PAIRS = (("this", "is"), ("it", "is"), ("this", "'s"), ("it", "'s"))
TRANS2_GROUPS = (
    tuple(itertools.product(("the", "this", "a"), ("movie", "film"))),
    tuple(itertools.product(("the", "these"), ("movies", "films"))),
)


def trans1() -> Transformation:
  """Trans1 (2→2): "this is" ↔ "it is" ↔ "this 's" ↔ "it 's"."""
  return _swap_within("Trans1", [TRANS1_PAIRS])


def trans2() -> Transformation:
  """Trans2 (2→2): {the,this,a}×{movie,film} and {the,these}×{movies,films}, within each group."""
  return _swap_within("Trans2", TRANS2_GROUPS)


def trans3() -> Transformation:
  """Trans3 (4→2): "one of the most" / "one of the Xest" → "the most" / "the Xest".

  As in the original, the superlative test is the suffix "est", so "one of the interest" also
  matches.
  """

  def match(w):
    return w[:3] == ("one", "of", "the") and (w[3] == "most" or w[3].endswith("est"))

  return Transformation("Trans3", 4, 2, match=match, replace=lambda w: [(w[2], w[3])],
                        standard=True)


def trans4() -> Transformation:
  """Trans4 (1→2): "!" → "! !" and "?" → "? ?"."""
  return Transformation(
      "Trans4", 1, 2, match=lambda w: w[0] in ("!", "?"), replace=lambda w: [(w[0], w[0])],
      repeats_token=True, standard=True,
  )
