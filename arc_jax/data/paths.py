"""Where the real data and the caches live.

Data files are searched, one file at a time, in: ``$ARC_DATA_DIR``, ``./data``,
``../shared/data`` (both relative to the working directory), then ``shared/data`` next to the
repository that holds this package (so that any working directory works in a checkout). Passing
``data_root`` explicitly searches that folder only.

Caches (TFDS array_record files, embedding matrices) go to ``$ARC_CACHE_DIR``, else
``~/.cache/arc_jax``.
"""

from __future__ import annotations

import hashlib
import os
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
  """A data file is missing from every folder searched."""


def data_roots(data_root: str | os.PathLike | None = None) -> list[Path]:
  """The folders searched for data files, in order (``data_root`` alone if given)."""
  if data_root is not None:
    return [Path(data_root)]
  roots = [Path(os.environ["ARC_DATA_DIR"])] if os.environ.get("ARC_DATA_DIR") else []
  roots += [Path("data"), Path("..") / "shared" / "data", _PACKAGE_SHARED_DATA]
  unique = []
  for root in roots:
    if root.resolve() not in [u.resolve() for u in unique]:
      unique.append(root)
  return unique


def _missing_error(missing: Sequence[str], roots: Sequence[Path]) -> DataFileNotFoundError:
  source = _SOURCES.get(Path(missing[0]).parts[0], "see shared/data/PROVENANCE.md")
  searched = ", ".join(str(r.resolve()) for r in roots)
  return DataFileNotFoundError(
      f"Data file(s) {', '.join(missing)} not found; searched: {searched}. "
      f"They come from {source}. Put them under one of these folders, set $ARC_DATA_DIR, or "
      "pass data_root=."
  )


def find_data_file(relative_path: str, data_root: str | os.PathLike | None = None) -> Path:
  """The first ``<root>/<relative_path>`` that exists.

  Raises:
    DataFileNotFoundError: naming the file, the folders searched and where the file comes from.
  """
  roots = data_roots(data_root)
  for root in roots:
    if (root / relative_path).is_file():
      return (root / relative_path).resolve()
  raise _missing_error([relative_path], roots)


def find_dataset_dir(name: str, files: Sequence[str],
                     data_root: str | os.PathLike | None = None) -> Path:
  """The first ``<root>/<name>`` folder that holds every one of ``files``.

  Raises:
    DataFileNotFoundError: naming the missing files (of the first root that has some of them).
  """
  roots = data_roots(data_root)
  best_missing = [f"{name}/{f}" for f in files]
  for root in roots:
    missing = [f"{name}/{f}" for f in files if not (root / name / f).is_file()]
    if not missing:
      return (root / name).resolve()
    if len(missing) < len(best_missing):
      best_missing = missing
  raise _missing_error(best_missing, roots)


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
