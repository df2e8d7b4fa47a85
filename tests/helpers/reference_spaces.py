"""Shared hypothesis strategies and independent reference definitions for the perturbation tests.

The reference definitions restate docs/ORIGINAL.md §2 directly as "window → set of replacements"
functions (empty set = no match, identity replacements removed), without using arc_jax code.
"""

import itertools

from hypothesis import strategies as st

STOP = frozenset({"a", "and", "the", "of", "to"})
PAIRS_A = {("this", "is"), ("it", "is"), ("this", "'s"), ("it", "'s")}
PAIRS_B = set(itertools.product(["the", "this", "a"], ["movie", "film"]))
PAIRS_C = set(itertools.product(["the", "these"], ["movies", "films"]))

# Multi-token phrases make the multi-token transformations match often in random sentences.
PHRASES = ("this is", "it 's", "the movie", "a film", "these films", "one of the most",
           "one of the best", "to the movie", "one of the interest", "the best !")
WORDS = ("a", "and", "the", "to", "of", "one", "most", "best", "this", "it", "is", "'s", "movie",
         "film", "movies", "films", "these", "!", "?", "good", "bad")
CHUNKS = PHRASES + WORDS
ALPHABET = tuple(sorted({w for c in CHUNKS for w in c.split()}))


def sentences(max_len=6):
  """Non-empty token tuples of ≤ max_len tokens made of CHUNKS (empty ones: explicit tests)."""
  chunk = st.one_of(st.sampled_from(PHRASES), st.sampled_from(WORDS))
  chunks = st.lists(chunk, min_size=1, max_size=max_len)
  return chunks.map(lambda cs: tuple(" ".join(cs).split())[:max_len])


def lexicons():
  """Random synonym lexicons over ALPHABET, with self-synonyms and duplicates on purpose."""
  words = st.sampled_from(ALPHABET)
  return st.dictionaries(words, st.lists(words, max_size=3), min_size=4, max_size=12)


def ref_replacements(name, window, synonyms=None, stop=STOP):
  """docs/ORIGINAL.md §2: the set of replacements of ``window`` under transformation ``name``."""
  w = tuple(window)
  out = set()
  if name == "Del" and len(w) == 1 and w[0] in stop:
    out = {()}
  elif name in ("Ins", "Dup") and len(w) == 1:
    out = {(w[0], w[0])}
  elif name == "Sub" and len(w) == 1:
    out = {(c,) for c in (synonyms or {}).get(w[0], ())}
  elif name == "Trans1" and w in PAIRS_A:
    out = PAIRS_A
  elif name == "Trans2":
    out = next((g for g in (PAIRS_B, PAIRS_C) if w in g), set())
  elif name == "Trans3" and len(w) == 4 and w[:3] == ("one", "of", "the") and (
      w[3] == "most" or w[3][-3:] == "est"):
    out = {(w[2], w[3])}
  elif name == "Trans4" and w in (("!",), ("?",)):
    out = {(w[0], w[0])}
  return {r for r in out if r != w}


REF_SIZES = {"Del": (1, 0), "Ins": (1, 2), "Dup": (1, 2), "Sub": (1, 1), "Trans1": (2, 2),
             "Trans2": (2, 2), "Trans3": (4, 2), "Trans4": (1, 2)}
