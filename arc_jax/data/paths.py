"""Where the real data and the caches live.

Every data file comes from one folder, the data folder (:func:`data_folder`): ``data_root``
when passed, else ``$ARC_DATA_DIR`` when set (a missing file there is an error, never looked for
elsewhere), else the first of ``./data``, ``../shared/data`` (both relative to the working
directory) and ``shared/data`` next to the repository that holds this package that exists.
Files are never mixed from several folders.

Caches (TFDS array_record files, embedding matrices) go to ``$ARC_CACHE_DIR``, else
``~/.cache/arc_jax``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import zlib
from pathlib import Path
from typing import Sequence

_PACKAGE_SHARED_DATA = Path(__file__).resolve().parents[3] / "shared" / "data"

_SOURCES = {
    "sst2": "GLUE SST-2 train/dev (e.g. tfds glue/sst2 or glue_data/SST-2) and the A3T test set "
            "(ForeverZyh/A3T a3t/dataset/sst2test.txt), see shared/data/PROVENANCE.md §1",
    "sst": "the SST trainDevTestTrees_PTB trees (train/dev/test.txt, gzipped), see "
           "shared/data/PROVENANCE.md §2",
    "synonyms": "counterfitted_neighbors.json (ForeverZyh/certified_lstms data/) and the PPDB "
                "synonym pairs of nmrksic/counter-fitting, see shared/data/PROVENANCE.md §3",
    "imdb": "aclImdb v1 as JSON lines and the split files of ForeverZyh/certified_lstms "
            "data/splits/, see shared/data/PROVENANCE.md §4",
    "embeddings": "300-d vectors in GloVe's text format (GloVe from "
                  "nlp.stanford.edu/projects/glove, or the w2v-movies stand-in), see "
                  "shared/data/PROVENANCE.md §5",
    "stopwords.txt": "the 5 stop words of ARC's Del, see shared/data/PROVENANCE.md §6",
}


class DataFileNotFoundError(FileNotFoundError):
  """A data file is missing from the data folder, or there is no data folder."""


class DataFileError(ValueError):
  """A data file cannot be read: truncated, corrupt, or not the file PROVENANCE.md describes."""


DEFAULT_FOLDERS = (Path("data"), Path("..") / "shared" / "data", _PACKAGE_SHARED_DATA)
"""The folders tried, in order, when neither ``data_root`` nor ``$ARC_DATA_DIR`` is given."""


def data_folder(data_root: str | os.PathLike | None = None) -> Path:
  """The one folder every data file is read from (absolute; see the module docstring).

  Raises:
    DataFileNotFoundError: the chosen folder does not exist, naming how it was chosen.
  """
  if data_root is not None:
    chosen, how = Path(data_root), "data_root (config.data_dir)"
  elif os.environ.get("ARC_DATA_DIR"):
    chosen, how = Path(os.environ["ARC_DATA_DIR"]), "$ARC_DATA_DIR"
  else:
    found = [folder for folder in DEFAULT_FOLDERS if folder.is_dir()]
    if not found:
      tried = ", ".join(str(f.absolute()) for f in DEFAULT_FOLDERS)
      raise DataFileNotFoundError(f"No data folder: none of {tried} exists. Set $ARC_DATA_DIR "
                                  "to the folder of shared/data/PROVENANCE.md's files.")
    chosen, how = found[0], "the first existing of ./data, ../shared/data"
  if not chosen.is_dir():
    raise DataFileNotFoundError(f"The data folder {chosen.absolute()} (from {how}) does not "
                                "exist; point it at the folder of shared/data/PROVENANCE.md's "
                                "files.")
  return chosen.resolve()


def source_of(relative_path: str) -> str:
  """Where a data file comes from (for error messages)."""
  return _SOURCES.get(Path(relative_path).parts[0], "see shared/data/PROVENANCE.md")


def _missing_error(missing: Sequence[str], folder: Path) -> DataFileNotFoundError:
  return DataFileNotFoundError(
      f"Data file(s) {', '.join(missing)} not found in the data folder {folder}. They come from "
      f"{source_of(missing[0])}. Put them there, or set $ARC_DATA_DIR to the folder that holds "
      "them.")


def find_data_file(relative_path: str, data_root: str | os.PathLike | None = None) -> Path:
  """``<data folder>/<relative_path>``.

  Raises:
    DataFileNotFoundError: naming the file, the data folder and where the file comes from.
  """
  folder = data_folder(data_root)
  if not (folder / relative_path).is_file():
    raise _missing_error([relative_path], folder)
  return folder / relative_path


def find_dataset_dir(name: str, files: Sequence[str],
                     data_root: str | os.PathLike | None = None) -> Path:
  """``<data folder>/<name>``, which must hold every one of ``files``.

  Raises:
    DataFileNotFoundError: naming the missing files.
  """
  folder = data_folder(data_root)
  missing = [f"{name}/{f}" for f in files if not (folder / name / f).is_file()]
  if missing:
    raise _missing_error(missing, folder)
  return folder / name


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
