"""Programmable perturbation spaces S = {(T_1, δ_1), …, (T_m, δ_m)} (paper §3.1).

S(x) is the set of strings obtained from x by applying each T_k at most δ_k times, at
non-overlapping windows of the *original* string, all in parallel. An *application choice* is a
set of non-overlapping (window, transformation, replacement) picks within the budgets; every choice
gives one string of S(x) (the empty choice gives x), and different choices may give the same string.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from typing import Collection, Iterator, Mapping, Sequence

import numpy as np

from arc_jax.data.fetch import STOP_WORDS
from arc_jax.perturbation import transformations as tr

Tokens = tr.Tokens


def decomposition(budgets: Sequence[int]) -> np.ndarray:
  """dec(S): every budget vector c with 0 ≤ c_k ≤ δ_k, as an int array of shape (C, m).

  C = ∏_k (δ_k + 1). Rows are in lexicographic order (``itertools.product``: the last
  transformation varies fastest), so row 0 is the zero vector and row ``C - 1`` is δ itself.
  """
  rows = list(itertools.product(*(range(d + 1) for d in budgets)))
  return np.asarray(rows, dtype=np.int32).reshape(len(rows), len(budgets))


@dataclasses.dataclass(frozen=True)
class Signature:
  """All the certification DP needs to know of a space: the sizes and budgets of its rewrites.

  Hashable, so jitted functions take it as a static argument; the words themselves reach the DP
  through the plan arrays. A space and its reversal have the same signature.

  Attributes:
    s: window size of each transformation.
    t: replacement size of each transformation.
    budgets: δ of each transformation.
    repeats: whether each transformation repeats its one window token (``repeats_token``).
  """

  s: tuple[int, ...]
  t: tuple[int, ...]
  budgets: tuple[int, ...]
  repeats: tuple[bool, ...] = ()

  def __post_init__(self):
    if not self.repeats:
      object.__setattr__(self, "repeats", (False,) * len(self.s))

  @property
  def signature(self) -> Signature:
    return self

  @property
  def grid(self) -> tuple[int, ...]:
    """Shape of the decomposition grid, (δ_1+1, …, δ_m+1)."""
    return tuple(d + 1 for d in self.budgets)

  def decomposition(self) -> np.ndarray:
    return decomposition(self.budgets)

  def grid_size(self) -> int:
    """C = ∏_k (δ_k + 1): the budget slots the DP keeps per position (or tree node)."""
    return int(np.prod(self.grid, dtype=np.int64))

  def dp_memory_estimate(self, batch_size: int, hidden: int, length: int) -> int:
    """Bytes of the interval states of one certification DP over a batch, a lower bound.

    Per position the LSTM DP (``arc_jax.certify.lstm_dp``) holds, for the "keep" branch and one
    branch per transformation, the boxes (lo, hi) of h and c of every slot: (1 + m) · 2 · 2 ·
    B · C · H float32 values; training keeps them for all ``length`` positions for the backward
    pass. The Tree-LSTM DP holds the same per node. Used to refuse spaces that cannot fit before
    anything is built (``arc_jax.train.config.validate``).
    """
    per_position = (1 + len(self.budgets)) * 2 * 2 * batch_size * self.grid_size() * hidden
    return 4 * per_position * length


@dataclasses.dataclass(frozen=True)
class Space:
  """A perturbation space: transformations with their budgets δ_k.

  Attributes:
    transformations: T_1..T_m, distinct names.
    budgets: δ_1..δ_m, non-negative.
  """

  transformations: tuple[tr.Transformation, ...]
  budgets: tuple[int, ...]

  def __post_init__(self):
    names = [t.name for t in self.transformations]
    if len(set(names)) != len(names):
      raise ValueError(f"A space lists each transformation once; got {names}. Add the budgets up.")
    if len(self.budgets) != len(self.transformations):
      raise ValueError("A space needs one budget per transformation.")
    for name, delta in zip(names, self.budgets):
      if not isinstance(delta, (int, np.integer)) or delta < 0:
        raise ValueError(f"Budget of {name} must be a non-negative integer, got {delta!r}.")

  def __str__(self):
    return "[" + ",".join(f"({t.name},{d})" for t, d in zip(self.transformations, self.budgets)) + "]"

  @property
  def names(self) -> tuple[str, ...]:
    return tuple(t.name for t in self.transformations)

  @property
  def is_length_preserving(self) -> bool:
    return all(t.s == t.t for t in self.transformations)

  @property
  def signature(self) -> Signature:
    return Signature(tuple(t.s for t in self.transformations),
                     tuple(t.t for t in self.transformations), tuple(self.budgets),
                     tuple(t.repeats_token for t in self.transformations))

  def decomposition(self) -> np.ndarray:
    """dec(S) in the order of :func:`decomposition`."""
    return decomposition(self.budgets)

  def grid_size(self) -> int:
    """See :meth:`Signature.grid_size`."""
    return self.signature.grid_size()

  def reversed(self) -> Space:
    """S^R with every T_k reversed: S^R(reverse(x)) = reverse(S(x))."""
    return Space(tuple(t.reversed() for t in self.transformations), self.budgets)

  def restricted_to(self, vocabulary: Collection[str]) -> Space:
    """The space whose replacements only use words of ``vocabulary`` (see Transformation)."""
    return Space(tuple(t.restricted_to(vocabulary) for t in self.transformations), self.budgets)

  def windows(self, tokens: Sequence[str]) -> list[list[tuple[Tokens, ...]]]:
    """Replacements per start position: ``out[i][k]`` = replacements of T_k at tokens[i:i+s_k]."""
    tokens = tuple(tokens)
    n = len(tokens)
    return [
        [t.replacements(tokens[i:i + t.s]) if i + t.s <= n else () for t in self.transformations]
        for i in range(n)
    ]

  def enumerate(self, tokens: Sequence[str]) -> Iterator[Tokens]:
    """Yields every string of S(tokens) exactly once (``tokens`` itself first)."""
    tokens = tuple(tokens)
    repl = self.windows(tokens)
    seen = set()

    def walk(i, budget, prefix):
      if i == len(tokens):
        yield prefix
        return
      yield from walk(i + 1, budget, prefix + tokens[i:i + 1])
      for k, t in enumerate(self.transformations):
        if budget[k] and repl[i][k]:
          rest = budget[:k] + (budget[k] - 1,) + budget[k + 1:]
          for r in repl[i][k]:
            yield from walk(i + t.s, rest, prefix + r)

    for s in walk(0, self.budgets, ()):
      if s not in seen:
        seen.add(s)
        yield s

  def count(self, tokens: Sequence[str]) -> int:
    """The exact number of application choices for ``tokens`` (Python int, no enumeration).

    A DP over start positions: ways[i][c] = number of choices on tokens[i:] that use exactly c_k
    applications of each T_k. Equals the number of strings :meth:`enumerate` visits before it
    removes duplicates. Cost O(n · C · m).
    """
    tokens = tuple(tokens)
    n, dec = len(tokens), [tuple(c) for c in self.decomposition()]
    index = {c: r for r, c in enumerate(dec)}
    repl = self.windows(tokens)
    ways = [[0] * len(dec) for _ in range(n + 1)]
    ways[n][0] = 1
    for i in range(n - 1, -1, -1):
      row = list(ways[i + 1])
      for k, t in enumerate(self.transformations):
        if not repl[i][k]:
          continue
        for r, c in enumerate(dec):
          if c[k]:
            below = index[c[:k] + (c[k] - 1,) + c[k + 1:]]
            row[r] += len(repl[i][k]) * ways[i + t.s][below]
      ways[i] = row
    return sum(ways[0])


# ---------------------------------------------------------------------------------------------
# Spec strings.

_TOKEN = re.compile(rf"\s*(?:(?P<punct>[\[\](),])|(?P<name>{tr.NAME_PATTERN})|(?P<int>-?\d+(?:\.\d*)?))")

STANDARD_NAMES = tr.STANDARD_NAMES


class SpecError(ValueError):
  """A malformed perturbation-space spec string."""


def standard_transformation(
    name: str,
    *,
    synonyms: Mapping[str, Sequence[str]] | None = None,
    stopwords: Collection[str] | None = None,
    custom: Mapping[str, tr.Transformation] | None = None,
) -> tr.Transformation:
  """The transformation called ``name``: one of ``custom``, a registered one
  (:func:`~arc_jax.perturbation.transformations.register_transformation`) or a standard one."""
  custom = dict(custom or {})
  reused = sorted(set(custom) & set(STANDARD_NAMES))
  if reused:
    raise ValueError(f"custom={{{reused[0]!r}: ...}} reuses the name of a standard transformation; "
                     f"register yours under another name (e.g. 'My{reused[0]}').")
  custom = {**tr.REGISTERED, **custom}
  if name in custom:
    return custom[name]
  if name == "Del":
    return tr.delete_stop_words(STOP_WORDS if stopwords is None else stopwords)
  if name in ("Ins", "Dup"):
    return tr.duplicate(name)
  if name == "Sub":
    if synonyms is None:
      raise ValueError(
          "Sub needs a synonym lexicon: pass synonyms={word: [candidates]} "
          "(e.g. arc_jax.data.load_synonyms())."
      )
    return tr.substitute(synonyms)
  builders = {"Trans1": tr.trans1, "Trans2": tr.trans2, "Trans3": tr.trans3, "Trans4": tr.trans4}
  if name in builders:
    return builders[name]()
  valid = ", ".join(list(STANDARD_NAMES) + sorted(custom))
  raise ValueError(f"Unknown transformation {name!r}. Valid names: {valid}.")


def parse_space(
    spec: str,
    *,
    synonyms: Mapping[str, Sequence[str]] | None = None,
    stopwords: Collection[str] | None = None,
    custom: Mapping[str, tr.Transformation] | None = None,
) -> Space:
  """Parses a spec string such as ``"[(Del,2),(Sub,2)]"`` into a :class:`Space`.

  Grammar (whitespace anywhere between tokens): ``'[' [ item (',' item)* ] ']'`` with
  ``item = '(' NAME ',' INT ')'``.

  Args:
    spec: the spec string.
    synonyms: word → candidate words, required by ``Sub``.
    stopwords: words ``Del`` may delete (default: :data:`STOP_WORDS`).
    custom: extra transformations by name, besides the registered ones (standard names are
      refused: a spec that says Ins means the library's Ins everywhere).

  Raises:
    SpecError: malformed syntax (with the character position), a negative budget or a
      duplicated name.
    ValueError: an unknown transformation name (lists the valid ones) or Sub without synonyms.
  """
  tokens = []
  pos = 0
  while pos < len(spec):
    if spec[pos:].strip() == "":
      break
    m = _TOKEN.match(spec, pos)
    if not m:
      raise SpecError(f"Unexpected character {spec[pos:].lstrip()[0]!r} at position "
                      f"{len(spec) - len(spec[pos:].lstrip())} in {spec!r}.")
    kind = m.lastgroup
    tokens.append((kind, m.group(kind), m.start(kind)))
    pos = m.end()
  tokens.append(("end", "", len(spec)))
  cursor = [0]

  def expect(kind, value=None):
    k, v, p = tokens[cursor[0]]
    if k != kind or (value is not None and v != value):
      wanted = repr(value) if value else {"name": "a transformation name", "int": "an integer",
                                        "end": "the end of the string"}[kind]
      found = "the end of the string" if k == "end" else repr(v)
      raise SpecError(f"Expected {wanted} at position {p} in {spec!r}, found {found}.")
    cursor[0] += 1
    return v, p

  items = []
  expect("punct", "[")
  if tokens[cursor[0]][1] != "]":
    while True:
      expect("punct", "(")
      name, name_pos = expect("name")
      expect("punct", ",")
      delta, delta_pos = expect("int")
      if not delta.lstrip("-").isdigit():
        raise SpecError(f"Budget of {name} must be an integer, got {delta} at position {delta_pos}.")
      if int(delta) < 0:
        raise SpecError(f"Budget of {name} must be >= 0, got {delta} at position {delta_pos}.")
      expect("punct", ")")
      if name in [n for n, _ in items]:
        raise SpecError(f"{name} appears twice in {spec!r} (position {name_pos}); give it one budget.")
      items.append((name, int(delta)))
      if tokens[cursor[0]][1] != ",":
        break
      expect("punct", ",")
  expect("punct", "]")
  expect("end")
  return Space(
      tuple(
          standard_transformation(n, synonyms=synonyms, stopwords=stopwords, custom=custom)
          for n, _ in items
      ),
      tuple(d for _, d in items),
  )


def data_space(data, spec: str) -> Space:
  """The space ``spec`` of an experiment's data: :func:`parse_space` with the synonyms and stop
  words of ``data`` (an :class:`arc_jax.data.ExperimentData`), restricted to its vocabulary."""
  return parse_space(spec, synonyms=data.synonyms, stopwords=data.stopwords).restricted_to(
      data.vocab)
