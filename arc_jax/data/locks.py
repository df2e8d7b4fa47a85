"""A lock between processes (and threads) that build or download the same files at once."""

from __future__ import annotations

import contextlib
import fcntl
from pathlib import Path
from typing import Iterator


@contextlib.contextmanager
def exclusively(lock_path: Path) -> Iterator[None]:
  """Holds an exclusive lock on ``lock_path`` (created if missing), waiting for any other
  holder, in this process or another.

  Why: runs started at once on a fresh cache would all build (or download) the same files, and
  each but the first then failed renaming its copy into place. Under the lock the later ones
  wait and find them made.
  """
  lock_path.parent.mkdir(parents=True, exist_ok=True)
  with open(lock_path, "a") as handle:  # its own open file description: flock excludes threads too
    fcntl.flock(handle, fcntl.LOCK_EX)
    try:
      yield
    finally:
      fcntl.flock(handle, fcntl.LOCK_UN)
