"""One call that assembles what an experiment needs: splits, vocabulary, embeddings, synonyms.

The vocabulary covers every split (train, validation and test) and the synonym candidates of
their words: embeddings are frozen for the LSTMs, so seeing the test words leaks nothing, and one
vocabulary serves training and certification alike (ARC rebuilt it per run, docs/ORIGINAL.md §1).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Any

import numpy as np

from arc_jax.data.datasets import SPLITS, Example, load_imdb, load_sst2, load_sst_trees
from arc_jax.data.embeddings import (OovReport, build_vocab_and_embeddings, count_oov,
                                     default_vectors, drop_oov)
from arc_jax.data.synonyms import (candidate_words, load_stopwords, load_synonyms,
                                   restrict_synonyms)

logger = logging.getLogger(__name__)

_LOADERS = {"sst2": load_sst2, "imdb": load_imdb}


@dataclasses.dataclass(frozen=True)
class TextSplit:
  """One split after the out-of-vocabulary policy.

  Attributes:
    tokens: the sentences, every token in the vocabulary (some may be empty, see stats).
    labels: int32 (n,).
    source_indices: int32 (n,), index of each sentence in the loaded split (they differ only when
      empty sentences were dropped).
  """

  tokens: tuple[tuple[str, ...], ...]
  labels: np.ndarray
  source_indices: np.ndarray

  def __len__(self) -> int:
    return len(self.tokens)

  def __getitem__(self, rows: slice) -> TextSplit:
    """The split limited to ``rows`` (a slice, e.g. ``split[:n]``), as tree splits (lists) are."""
    if not isinstance(rows, slice):
      raise TypeError(f"A TextSplit is sliced (split[:n]); got {rows!r}. Read single examples "
                      "from split.tokens and split.labels.")
    return TextSplit(self.tokens[rows], self.labels[rows], self.source_indices[rows])


@dataclasses.dataclass(frozen=True)
class ExperimentData:
  """Everything a model, its certifier and its trainer need about the data.

  Attributes:
    splits: split name → data (:class:`TextSplit` for LSTMs, ``list[Tree]`` for trees).
    vocab: word → embedding row (0 = padding/unknown).
    embeddings: float32 (V, D), row 0 zero.
    synonyms: word → Sub candidates, all in the vocabulary.
    stopwords: the words Del may delete.
    stats: JSON-ready counts: vocabulary, vectors, synonyms and per split the OOV report.

  The perturbation space ``spec`` over this data is ``arc_jax.perturbation.data_space(data, spec)``.
  """

  splits: dict[str, Any]
  vocab: dict[str, int]
  embeddings: np.ndarray
  synonyms: dict[str, tuple[str, ...]]
  stopwords: tuple[str, ...]
  stats: dict[str, Any]


def _oov_stats(report: OovReport) -> dict[str, Any]:
  return {"tokens": report.tokens, "types": report.types, "dropped_tokens": report.dropped,
          "dropped_types": len(report.dropped_types),
          "token_coverage": round(report.token_coverage, 6),
          "type_coverage": round(report.type_coverage, 6), "empty": list(report.empty),
          "empty_share": round(report.empty_share, 6)}


def _common_stats(embeddings, synonyms, kind, max_candidates) -> dict[str, Any]:
  return {
      "vocab_size": len(embeddings.vocab) + 1,
      "vectors": str(embeddings.source),
      "words_with_vectors": embeddings.with_vectors,
      "words_without_vectors": len(embeddings.missing),
      "synonyms": {"kind": kind, "max_candidates": max_candidates, "words": len(synonyms),
                   "candidates": sum(len(c) for c in synonyms.values())},
  }


def _text_split(examples: list[Example], vocab: dict[str, int], name: str,
                drop_empty: bool) -> tuple[TextSplit, dict[str, Any]]:
  """One split after the OOV policy, and its stats."""
  tokens, report = drop_oov([e.tokens for e in examples], vocab, name)
  dropped = set(report.empty) if drop_empty else set()
  keep = [i for i in range(len(tokens)) if i not in dropped]
  split = TextSplit(tuple(tokens[i] for i in keep),
                    np.array([examples[i].label for i in keep], np.int32),
                    np.array(keep, np.int32))
  return split, {"examples": len(keep), **_oov_stats(report)}


def prepare_lstm_data(dataset: str = "sst2", *, synonyms: str = "counterfitted",
                      max_candidates: int | None = None,
                      vectors: str | os.PathLike | None = None, drop_empty: bool = False,
                      data_root: str | os.PathLike | None = None,
                      cache_dir: str | os.PathLike | None = None) -> ExperimentData:
  """Data of an LSTM / Bi-LSTM experiment, with the OOV policy applied and counted.

  Args:
    dataset: ``"sst2"`` or ``"imdb"``.
    synonyms: synonym lexicon, ``"counterfitted"`` or ``"ppdb"`` (see ``load_synonyms``).
    max_candidates: at most this many Sub candidates per word (1 = ARC's ``--use-fewer-sub``).
    vectors: GloVe-format vector file; default :func:`~arc_jax.data.embeddings.default_vectors`.
    drop_empty: remove the sentences left without tokens (as ARC did); by default they stay,
      empty. Either way ``stats["splits"][split]["empty"]`` lists them.
    data_root, cache_dir: see :mod:`arc_jax.data.paths`.
  """
  if dataset not in _LOADERS:
    raise ValueError(f"Unknown dataset {dataset!r}; choose one of {sorted(_LOADERS)} "
                     "(Tree-LSTM data: prepare_tree_data).")
  examples = _LOADERS[dataset](data_root, cache_dir)
  lexicon = load_synonyms(synonyms, max_candidates=max_candidates, data_root=data_root)
  words = candidate_words(lexicon, (w for s in SPLITS for e in examples[s] for w in e.tokens))
  embeddings = build_vocab_and_embeddings(words, vectors or default_vectors(dataset, data_root),
                                          data_root=data_root, cache_dir=cache_dir)
  splits, split_stats = {}, {}
  for split in SPLITS:
    splits[split], split_stats[split] = _text_split(examples[split], embeddings.vocab,
                                                    f"{dataset} {split}", drop_empty)
  restricted = restrict_synonyms(lexicon, embeddings.vocab)
  stats = {"dataset": dataset, **_common_stats(embeddings, restricted, synonyms, max_candidates),
           "drop_empty": drop_empty, "splits": split_stats}
  return ExperimentData(splits, embeddings.vocab, embeddings.matrix, restricted,
                        load_stopwords(data_root), stats)


def prepare_tree_data(*, synonyms: str = "counterfitted", max_candidates: int | None = None,
                      vectors: str | os.PathLike | None = None,
                      data_root: str | os.PathLike | None = None,
                      cache_dir: str | os.PathLike | None = None) -> ExperimentData:
  """Data of a Tree-LSTM experiment on the SST trees (splits hold ``list[Tree]``).

  Every leaf word is in the vocabulary; those without vectors get zero rows (docs/ORIGINAL.md §1)
  and are counted in ``stats["splits"][split]`` (``dropped_*`` there means "has a zero vector";
  ``empty``: trees none of whose leaves has a vector). Sub candidates are kept only if they have
  vectors.
  """
  trees = load_sst_trees(data_root, cache_dir)
  lexicon = load_synonyms(synonyms, max_candidates=max_candidates, data_root=data_root)
  leaves = [w for s in SPLITS for t in trees[s] for w in t.tokens]
  embeddings = build_vocab_and_embeddings(candidate_words(lexicon, leaves),
                                          vectors or default_vectors("sst_trees", data_root),
                                          keep_without_vectors=set(leaves), data_root=data_root,
                                          cache_dir=cache_dir)
  with_vectors = set(embeddings.vocab).difference(embeddings.missing)
  split_stats = {}
  for split in SPLITS:
    report = count_oov([t.tokens for t in trees[split]], with_vectors)
    logger.info("sst trees %s: %d of %d leaves (%d types) have zero vectors.", split,
                report.dropped, report.tokens, len(report.dropped_types))
    split_stats[split] = {"examples": len(trees[split]), **_oov_stats(report)}
  restricted = restrict_synonyms(lexicon, with_vectors)
  stats = {"dataset": "sst_trees",
           **_common_stats(embeddings, restricted, synonyms, max_candidates),
           "splits": split_stats}
  return ExperimentData(dict(trees), embeddings.vocab, embeddings.matrix, restricted,
                        load_stopwords(data_root), stats)
