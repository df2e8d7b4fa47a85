"""Synonym lexicons for ``Sub`` and the stop words for ``Del``.

Two lexicons (docs/DATA.md, synonyms):

* ``"counterfitted"`` (default): counter-fitted vector neighbours, ``word → [neighbours]``
  (ARC's default attack surface, docs/ORIGINAL.md §2).
* ``"ppdb"``: the PPDB 2.0 synonym pairs used for counter-fitting, ``word1 word2`` per line, added
  in both directions. A stand-in for ARC's ``ppdb-2.0-s-lexical``: no POS tags, so candidates are
  not filtered by part of speech.

The result is the mapping ``arc_jax.parse_space(..., synonyms=...)`` takes.
"""

from __future__ import annotations

import gzip
import json
import os
from typing import Collection, Iterable, Mapping

from arc_jax.data import paths

SYNONYM_FILES = {
    "counterfitted": "synonyms/counterfitted_neighbors.json.gz",
    "ppdb": "synonyms/counterfitting_ppdb2_synonyms.txt.gz",
}


def _read_lexicon(kind: str, data_root) -> dict[str, list[str]]:
  if kind not in SYNONYM_FILES:
    raise ValueError(f"Unknown synonym lexicon {kind!r}; choose one of {sorted(SYNONYM_FILES)}.")
  path = paths.find_data_file(SYNONYM_FILES[kind], data_root)
  with paths.reading(path), gzip.open(path, "rt", encoding="utf-8") as f:
    if kind == "counterfitted":
      return json.load(f)
    lexicon = {}
    for number, line in enumerate(f, start=1):
      pair = line.split()
      if not pair:
        continue
      if len(pair) != 2:
        raise paths.DataFileError(f"{path}, line {number}: expected 'word1 word2', got "
                                  f"{line.strip()!r}.")
      lexicon.setdefault(pair[0], []).append(pair[1])
      lexicon.setdefault(pair[1], []).append(pair[0])
    return lexicon


def load_synonyms(kind: str = "counterfitted", vocabulary: Collection[str] | None = None, *,
                  max_candidates: int | None = None,
                  data_root: str | os.PathLike | None = None) -> dict[str, tuple[str, ...]]:
  """word → distinct synonym candidates (file order), without the word itself.

  Args:
    kind: ``"counterfitted"`` or ``"ppdb"``.
    vocabulary: if given, keep only words in it and candidates in it (like
      ``Space.restricted_to``), so that every word Sub can produce has an embedding.
    max_candidates: keep at most this many candidates per word, in file order
      (1 = ARC's ``--use-fewer-sub``); applied before the vocabulary filter, as ARC does.
    data_root: see :mod:`arc_jax.data.paths`.

  Returns:
    Words with at least one candidate left.
  """
  if max_candidates is not None and max_candidates < 1:
    raise ValueError(f"max_candidates must be >= 1 or None, got {max_candidates}.")
  lexicon = {}
  for word, candidates in _read_lexicon(kind, data_root).items():
    kept = tuple([c for c in dict.fromkeys(candidates) if c != word][:max_candidates])
    if kept:
      lexicon[word] = kept
  return lexicon if vocabulary is None else restrict_synonyms(lexicon, vocabulary)


def restrict_synonyms(synonyms: Mapping[str, Iterable[str]],
                      vocabulary: Collection[str]) -> dict[str, tuple[str, ...]]:
  """Keeps the words of ``vocabulary`` and their candidates in it; drops words left with none."""
  out = {}
  for word, candidates in synonyms.items():
    if word in vocabulary:
      kept = tuple(c for c in candidates if c in vocabulary)
      if kept:
        out[word] = kept
  return out


def candidate_words(synonyms: Mapping[str, Iterable[str]], words: Iterable[str]) -> list[str]:
  """``words``, then their synonym candidates: each word once, in first-appearance order."""
  words = list(dict.fromkeys(words))
  out = dict.fromkeys(words)
  for w in words:
    out.update(dict.fromkeys(synonyms.get(w, ())))
  return list(out)


def load_stopwords(data_root: str | os.PathLike | None = None) -> tuple[str, ...]:
  """The stop words ``Del`` may delete, from ``stopwords.txt`` (one per line)."""
  path = paths.find_data_file("stopwords.txt", data_root)
  with paths.reading(path), open(path, encoding="utf-8") as f:
    return tuple(w for w in (line.strip() for line in f) if w)
