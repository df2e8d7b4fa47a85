"""Where the data and the caches live.

Every data file comes from one folder, the data folder (:func:`resolve`), the first of:

1. ``data_root`` (``config.data_dir``) when given, and only there;
2. ``$ARC_DATA_DIR`` when set, and only there;
3. ``./data`` (relative to the working directory) when it exists, and only there;
4. with ``$ARC_DATA_MIRROR`` set, the download folder ``<cache>/data/mirror``, each file fetched
   from the mirror on first use;
5. otherwise the download folder ``<cache>/data/public``, each file made from its public source on
   first use (:mod:`arc_jax.data.fetch`; docs/DATA.md).

A missing file in a named folder is an error, never looked for elsewhere, and files are never
mixed from several folders. The choice is logged once per process, and runs record its symbolic
name (:attr:`DataFolder.source`), never a machine path.

Caches (TFDS array_record files, embedding matrices, the download folders) go to
``$ARC_CACHE_DIR``, else ``~/.cache/arc_jax``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import zlib
from pathlib import Path
from typing import Sequence

from arc_jax.data import fetch

logger = logging.getLogger(__name__)

DATA_DOCS = "docs/DATA.md"

_SOURCES = {
    "sst2": "GLUE SST-2 train/dev and the A3T test set (ForeverZyh/A3T sst2test.txt; docs/DATA.md, "
            "SST-2)",
    "sst": "the SST trainDevTestTrees_PTB trees (docs/DATA.md, SST trees)",
    "synonyms": "the counter-fitted neighbours of ForeverZyh/certified_lstms and the PPDB synonym "
                "pairs of nmrksic/counter-fitting (docs/DATA.md, synonyms)",
    "imdb": "aclImdb v1 and the split files of ForeverZyh/certified_lstms (docs/DATA.md, IMDB)",
    "embeddings": "300-d vectors in GloVe's text format: GloVe from "
                  "nlp.stanford.edu/projects/glove, or the w2v-movies stand-in (docs/DATA.md, "
                  "word vectors)",
    "stopwords.txt": "the 5 stop words of ARC's Del (docs/DATA.md, stop words)",
}


class DataFileNotFoundError(FileNotFoundError):
  """A data file is missing from the data folder, or there is no data folder."""


class DataFileError(ValueError):
  """A data file cannot be read: truncated, corrupt, refused by its checksum, or not the file
  docs/DATA.md describes."""


@dataclasses.dataclass(frozen=True)
class DataFolder:
  """The chosen data folder.

  Attributes:
    path: the folder (absolute).
    source: how it was chosen, as a run records it: ``"config.data_dir"``, ``"$ARC_DATA_DIR"``,
      ``"./data"``, ``"$ARC_DATA_MIRROR"`` or ``"public sources"``.
    mirror: the mirror's base URL when ``source`` is the mirror.
  """

  path: Path
  source: str
  mirror: str | None = None

  @property
  def downloads(self) -> bool:
    """Whether missing files are fetched (a download folder)."""
    return self.source in (MIRROR, PUBLIC)

  def has(self, relative_path: str) -> bool:
    """Whether ``relative_path`` is here, or can be fetched here."""
    if (self.path / relative_path).is_file():
      return True
    if self.source == MIRROR:
      return relative_path in fetch.layout()
    return self.source == PUBLIC and relative_path in fetch.SOURCE_OF


MIRROR, PUBLIC = "$ARC_DATA_MIRROR", "public sources"
_logged: set[DataFolder] = set()


def resolve(data_root: str | os.PathLike | None = None) -> DataFolder:
  """The one folder every data file is read from (see the module docstring), logged once.

  Raises:
    DataFileNotFoundError: a named folder does not exist, naming how it was named.
  """
  if data_root is not None:
    chosen = DataFolder(Path(data_root), "config.data_dir")
  elif os.environ.get("ARC_DATA_DIR"):
    chosen = DataFolder(Path(os.environ["ARC_DATA_DIR"]), "$ARC_DATA_DIR")
  elif Path("data").is_dir():
    chosen = DataFolder(Path("data"), "./data")
  elif os.environ.get("ARC_DATA_MIRROR", "").strip():
    chosen = DataFolder(cache_dir() / "data" / "mirror", MIRROR,
                        os.environ["ARC_DATA_MIRROR"].strip().rstrip("/"))
  else:
    chosen = DataFolder(cache_dir() / "data" / "public", PUBLIC)
  if not chosen.downloads and not chosen.path.is_dir():
    raise DataFileNotFoundError(f"The data folder {chosen.path.absolute()} (from "
                                f"{chosen.source}) does not exist; point it at a folder of the "
                                f"files {DATA_DOCS} lists, or leave it unset to download them.")
  chosen = dataclasses.replace(chosen, path=chosen.path.resolve())
  if chosen not in _logged:
    _logged.add(chosen)
    logger.info("Data folder %s (%s%s).", chosen.path, chosen.source,
                f" {chosen.mirror}, files fetched on first use" if chosen.mirror else
                ", files made from their public sources on first use" if chosen.downloads else "")
  return chosen


def data_folder(data_root: str | os.PathLike | None = None) -> Path:
  """The path of :func:`resolve`'s folder."""
  return resolve(data_root).path


def source_of(relative_path: str) -> str:
  """Where a data file comes from (for error messages)."""
  return _SOURCES.get(Path(relative_path).parts[0], f"see {DATA_DOCS}")


def _missing_error(missing: Sequence[str], folder: DataFolder) -> DataFileNotFoundError:
  return DataFileNotFoundError(
      f"Data file(s) {', '.join(missing)} not found in the data folder {folder.path} (from "
      f"{folder.source}). They come from {source_of(missing[0])}. Put them there, or set "
      "$ARC_DATA_DIR to the folder that holds them.")


def _present(relative_path: str, folder: DataFolder) -> bool:
  """Whether the file is in ``folder``, fetching it first into a download folder.

  Raises:
    DataFileError, DataFileNotFoundError: a refused or failed download, in one line.
  """
  if folder.downloads and not (folder.path / relative_path).is_file():
    try:
      fetch.fetch(relative_path, folder.path, folder.mirror)
    except KeyError:
      return False
    except fetch.ChecksumError as refused:
      raise DataFileError(str(refused)) from None
    except fetch.FetchError as failed:
      raise DataFileNotFoundError(str(failed)) from None
  return (folder.path / relative_path).is_file()


def find_data_file(relative_path: str, data_root: str | os.PathLike | None = None) -> Path:
  """``<data folder>/<relative_path>`` (fetched first into a download folder).

  Raises:
    DataFileNotFoundError: naming the file, the data folder and where the file comes from.
  """
  folder = resolve(data_root)
  if not _present(relative_path, folder):
    raise _missing_error([relative_path], folder)
  return folder.path / relative_path


def find_dataset_dir(name: str, files: Sequence[str],
                     data_root: str | os.PathLike | None = None) -> Path:
  """``<data folder>/<name>``, which must hold every one of ``files`` (fetched first into a
  download folder).

  Raises:
    DataFileNotFoundError: naming the missing files.
  """
  folder = resolve(data_root)
  missing = [f"{name}/{f}" for f in files if not _present(f"{name}/{f}", folder)]
  if missing:
    raise _missing_error(missing, folder)
  return folder.path / name


_UNREADABLE = (EOFError, OSError, zlib.error, UnicodeDecodeError, json.JSONDecodeError)
"""What reading a truncated or corrupt (gzip, UTF-8, JSON) file raises; gzip.BadGzipFile is an
OSError."""


@contextlib.contextmanager
def reading(path: Path):
  """Turns the errors of reading a damaged data file into one :class:`DataFileError` naming the
  file, what went wrong and where the file comes from."""
  try:
    yield
  except _UNREADABLE as error:
    if isinstance(error, FileNotFoundError):
      raise
    path = Path(path)
    key = path.name if path.name in _SOURCES else path.parent.name
    what = str(error).split("\n")[0] or type(error).__name__
    raise DataFileError(f"Data file {path} is truncated or corrupt ({type(error).__name__}: "
                        f"{what}). It comes from {source_of(key)}; fetch it again.") from None


def cache_dir(path: str | os.PathLike | None = None) -> Path:
  """The cache folder (created): ``path``, else ``$ARC_CACHE_DIR``, else ``~/.cache/arc_jax``."""
  chosen = path or os.environ.get("ARC_CACHE_DIR") or Path.home() / ".cache" / "arc_jax"
  chosen = Path(chosen).expanduser()
  chosen.mkdir(parents=True, exist_ok=True)
  return chosen


def file_fingerprint(paths: Sequence[Path], *extra: str) -> str:
  """A short hash of the files' absolute paths, sizes and modification times (and ``extra``)."""
  digest = hashlib.sha256()
  for p in paths:
    stat = Path(p).stat()
    digest.update(f"{Path(p).resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
  for e in extra:
    digest.update(e.encode() + b"\n")
  return digest.hexdigest()[:16]

