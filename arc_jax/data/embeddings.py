"""Vocabulary, word vectors in GloVe's text format, and the out-of-vocabulary policy.

The vocabulary of an experiment is the set of words it may ever see (the dataset's tokens and
their substitution candidates) that the vector file covers, in vector-file order, after id 0:
padding and unknown, with a zero vector (docs/ORIGINAL.md §1). Tree-LSTM vocabularies also keep
the leaf words the vectors lack (``keep_without_vectors``), with zero vectors.

OOV policy (docs/ORIGINAL.md §1), applied by :func:`drop_oov` and always counted:
* LSTM inputs: tokens outside the vocabulary are removed from the sentence. A sentence that
  becomes empty is kept (empty) and reported by index; the caller decides what to do with it.
* Tree leaves: every leaf word is in the vocabulary (``keep_without_vectors``); uncovered ones
  have zero vectors and are counted in :attr:`Embeddings.missing`.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import logging
import os
from pathlib import Path
from typing import Collection, Iterable, Sequence

import numpy as np

from arc_jax.data import paths

logger = logging.getLogger(__name__)

DEFAULT_VECTORS = "embeddings/w2v-movies.300d.txt.gz"
"""The stand-in vectors (docs/DATA.md): the default wherever the data folder holds them."""
PAPER_VECTORS = {"sst2": "embeddings/glove.6B.300d.txt",
                 "sst_trees": "embeddings/glove.840B.300d.txt",
                 "imdb": "embeddings/glove.840B.300d.txt"}
"""Dataset → the GloVe vectors the paper used for it, the default where the stand-in is absent
(the public sources have no stand-in)."""
_CACHE_FORMAT = "1"


@dataclasses.dataclass(frozen=True)
class Embeddings:
  """A vocabulary and its embedding matrix.

  Attributes:
    vocab: word → row of ``matrix``; ids start at 1 (0 is padding/unknown).
    matrix: float32 (V, D) with V = len(vocab) + 1; row 0 is zero.
    source: the vector file the rows come from.
    missing: requested words the vector file lacks, in request order; those of
      ``keep_without_vectors`` are in ``vocab`` with zero rows, the others are not in it.
  """

  vocab: dict[str, int]
  matrix: np.ndarray
  source: Path
  missing: tuple[str, ...]

  @property
  def words(self) -> tuple[str, ...]:
    """Row i + 1 → word i."""
    return tuple(self.vocab)

  @property
  def with_vectors(self) -> int:
    """Number of requested words that have a vector (the vocabulary less its zero rows)."""
    return len(self.vocab) - sum(w in self.vocab for w in self.missing)


def _open_binary(path: Path):
  return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


def read_vectors(path: str | os.PathLike, words: Iterable[str]) -> tuple[list[str], np.ndarray]:
  """Reads the vectors of ``words`` from a GloVe-format text file (plain or ``.gz``).

  Only lines whose word is wanted are split and converted. The dimension is taken from the first
  vector line, or from a word2vec ``count dim`` header line. Lines whose field count differs
  (GloVe 840B has a few words containing spaces) are skipped; the first valid line of a word wins.

  Returns:
    (found words in file order, float32 array (len(found), D)).
  """
  path = Path(path)
  wanted = {w.encode("utf-8") for w in words}
  found, rows, dim = [], [], None
  with paths.reading(path), _open_binary(path) as f:
    for number, line in enumerate(f):
      word, _, rest = line.partition(b" ")
      if dim is None:
        fields = rest.split()
        if number == 0 and len(fields) == 1 and word.isdigit() and fields[0].isdigit():
          dim = int(fields[0])  # word2vec header "count dim"
          continue
        dim = len(fields) or None  # None: a blank line
      if word in wanted and len(rest.split()) == dim:
        wanted.discard(word)
        found.append(word.decode("utf-8"))
        rows.append(rest)
  if dim is None:
    raise paths.DataFileError(f"{path} holds no vectors; expected lines 'word v1 … vd' (GloVe "
                              "format).")
  if not rows:
    return found, np.zeros((0, dim), np.float32)
  return found, np.loadtxt(rows, dtype=np.float32, ndmin=2)  # numpy's C parser, fastest here


def _cache_path(cache: Path, vectors: Path, words: Sequence[str], kept: Sequence[str]) -> Path:
  digest = hashlib.sha256("\n".join(words).encode("utf-8"))
  digest.update(b"\0" + "\n".join(kept).encode("utf-8"))
  key = paths.file_fingerprint([vectors], digest.hexdigest(), _CACHE_FORMAT)
  return cache / "embeddings" / f"{vectors.name.split('.txt')[0]}-{key}.npz"


def _lines(text: np.ndarray) -> list[str]:
  return [w for w in str(text).split("\n") if w]


def _vocab_rows(vectors: Path, words: list[str],
                kept: list[str]) -> tuple[list[str], np.ndarray, list[str]]:
  """(vocabulary words, matrix with a zero row 0, words without vectors) from the vector file."""
  found, rows = read_vectors(vectors, words)
  covered = set(found)
  vocab_words = found + [w for w in kept if w not in covered]
  matrix = np.zeros((len(vocab_words) + 1, rows.shape[1]), np.float32)
  matrix[1:len(found) + 1] = rows
  return vocab_words, matrix, [w for w in words if w not in covered]


def default_vectors(dataset: str, data_root: str | os.PathLike | None = None) -> Path:
  """The stand-in vectors when the data folder holds them (or its mirror serves them), else the
  paper's GloVe for ``dataset``, said in one log line."""
  folder = paths.resolve(data_root)
  if folder.has(DEFAULT_VECTORS):
    return paths.find_data_file(DEFAULT_VECTORS, data_root)
  glove = PAPER_VECTORS[dataset]
  logger.info("Word vectors: %s, the paper's GloVe for %s (the stand-in %s is not in the data "
              "folder, from %s).", glove, dataset, DEFAULT_VECTORS, folder.source)
  return paths.find_data_file(glove, data_root)


def build_vocab_and_embeddings(words: Iterable[str], vectors: str | os.PathLike | None = None, *,
                               keep_without_vectors: Collection[str] = (),
                               data_root: str | os.PathLike | None = None,
                               cache_dir: str | os.PathLike | None = None) -> Embeddings:
  """The vocabulary and embedding matrix for ``words``, cached in the cache folder.

  Args:
    words: every word the experiment may meet (the order only matters for rows without vectors).
    vectors: a GloVe-format file (e.g. ``glove.6B.300d.txt``, ``glove.840B.300d.txt``); default
      ``embeddings/w2v-movies.300d.txt.gz`` from the data folder (see :func:`default_vectors`).
    keep_without_vectors: words of ``words`` that get a (zero) row even without a vector, after
      the covered ones (Tree-LSTM leaves). A set, for speed.
    data_root, cache_dir: see :mod:`arc_jax.data.paths`.

  The matrix is cached as ``<cache_dir>/embeddings/<name>-<key>.npz``, the key hashing the word
  list and the vector file's path, size and modification time, so a second run skips the parse.
  """
  vectors = (paths.find_data_file(DEFAULT_VECTORS, data_root) if vectors is None
             else Path(vectors).expanduser().resolve())
  if not vectors.is_file():
    raise FileNotFoundError(
        f"Vector file {vectors} does not exist. Pass the path of a GloVe-format file "
        "(glove.6B.300d.txt, glove.840B.300d.txt) or None for the default.")
  words = list(dict.fromkeys(words))
  kept = [w for w in words if w in keep_without_vectors]
  cache_file = _cache_path(paths.cache_dir(cache_dir), vectors, words, kept)
  if cache_file.is_file():
    with np.load(cache_file) as cached:
      vocab_words, matrix, missing = (_lines(cached["words"]), cached["matrix"],
                                      _lines(cached["missing"]))
  else:
    vocab_words, matrix, missing = _vocab_rows(vectors, words, kept)
    cache_file.parent.mkdir(parents=True, exist_ok=True)
    temporary = cache_file.with_suffix(f".{os.getpid()}.npz")
    np.savez(temporary, words=np.array("\n".join(vocab_words)), matrix=matrix,
             missing=np.array("\n".join(missing)))
    temporary.replace(cache_file)  # atomic: concurrent runs never read a half-written file
  logger.info("%s: %d of %d words have vectors; %d missing, %d of them kept with zero vectors.",
              vectors.name, len(words) - len(missing), len(words), len(missing),
              len(vocab_words) - (len(words) - len(missing)))
  return Embeddings({w: i + 1 for i, w in enumerate(vocab_words)}, matrix, vectors,
                    tuple(missing))


@dataclasses.dataclass(frozen=True)
class OovReport:
  """Out-of-vocabulary counts of a list of sentences (what :func:`drop_oov` removes).

  Attributes:
    tokens: number of tokens seen.
    types: number of distinct words seen.
    dropped: number of tokens removed (not in the vocabulary).
    dropped_types: distinct removed words.
    empty: indices of sentences that had tokens and have none left (kept, as empty sentences).
    sentences: number of sentences seen.
  """

  tokens: int
  types: int
  dropped: int
  dropped_types: frozenset[str]
  empty: tuple[int, ...]
  sentences: int

  @property
  def empty_share(self) -> float:
    """Share of sentences left empty."""
    return len(self.empty) / max(self.sentences, 1)

  @property
  def token_coverage(self) -> float:
    """Share of tokens kept."""
    return 1.0 - self.dropped / max(self.tokens, 1)

  @property
  def type_coverage(self) -> float:
    """Share of distinct words kept."""
    return 1.0 - len(self.dropped_types) / max(self.types, 1)

  def __str__(self):
    empty = f" (indices {list(self.empty[:10])}{' …' if len(self.empty) > 10 else ''})"
    return (f"{self.dropped} of {self.tokens} tokens ({1 - self.token_coverage:.2%}; "
            f"{len(self.dropped_types)} of {self.types} types) dropped as out of vocabulary; "
            f"{len(self.empty)} sentences became empty{empty if self.empty else ''}")


def count_oov(sentences: Sequence[Sequence[str]], vocab: Collection[str]) -> OovReport:
  """Counts the tokens of ``sentences`` outside ``vocab`` (anything supporting ``in``)."""
  types, dropped_types, dropped, total, empty = set(), set(), 0, 0, []
  for i, sentence in enumerate(sentences):
    missing = [w for w in sentence if w not in vocab]
    if missing:
      dropped_types.update(missing)
      dropped += len(missing)
      if len(missing) == len(sentence):
        empty.append(i)
    types.update(sentence)
    total += len(sentence)
  return OovReport(total, len(types), dropped, frozenset(dropped_types), tuple(empty),
                   len(sentences))


def drop_oov(sentences: Sequence[Sequence[str]], vocab: Collection[str],
             name: str = "sentences") -> tuple[list[tuple[str, ...]], OovReport]:
  """Removes out-of-vocabulary tokens (the LSTM policy) and reports what went, never silently.

  Args:
    sentences: tokenised sentences.
    vocab: the vocabulary (anything supporting ``in``).
    name: what the sentences are, for the log line.

  Returns:
    (filtered sentences, in the same number and order as ``sentences``; the report). The report
    is also logged, as a warning when some sentences became empty.
  """
  report = count_oov(sentences, vocab)
  filtered = [tuple(w for w in s if w in vocab) for s in sentences]
  logger.log(logging.WARNING if report.empty else logging.INFO, "%s: %s", name, report)
  return filtered, report


def check_vocabulary(sentences: Sequence[Sequence[str]], vocab: Collection[str]) -> None:
  """Raises a KeyError naming the first sentence with tokens outside ``vocab``, and the fix."""
  for i, sentence in enumerate(sentences):
    missing = [w for w in sentence if w not in vocab]
    if missing:
      raise KeyError(f"Sentence {i} has tokens outside the vocabulary: {missing[:5]}. Drop "
                     "out-of-vocabulary tokens first (arc_jax.data.drop_oov).")
