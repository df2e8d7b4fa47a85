"""What an exhaustive search (EX) has decided so far, kept in a file so that a stopped search
resumes where it stopped.

Enumerating S(x) for a whole test split can take hours (millions of Tree-LSTM members under
``[(Sub,2),(Ins,2)]``), longer than a session or a scheduler's slot. :class:`Journal` appends one
JSON line per example as soon as the search has decided it (its clean prediction, whether a
member was misclassified, the members classified, the counterexample), so nothing decided is
lost to SIGTERM or a kill: the next search with the same key takes those examples from the file
and enumerates only the others. Lines are appended and flushed after every predictor batch; a
line cut short by a kill is ignored (that example is searched again).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from arc_jax.data.trees import Nested
from arc_jax.perturbation.spaces import Tokens

logger = logging.getLogger(__name__)

Member = Tokens | Nested
"""A member of a perturbation space: a token tuple (strings) or nested pairs (trees)."""


def to_json(member: Member):
  """A member as JSON: a list of tokens, or nested lists of words for a tree."""
  return member if isinstance(member, str) else [to_json(e) for e in member]


def from_json(value) -> Member:
  """The member :func:`to_json` wrote (lists back to tuples)."""
  return value if isinstance(value, str) else tuple(from_json(e) for e in value)


def digest(*arrays) -> str:
  """A short hash of the values, shapes and dtypes of arrays (labels, certificates, a model's
  parameters) for a journal key."""
  hashed = hashlib.sha256()
  for array in arrays:
    array = np.ascontiguousarray(array)
    hashed.update(f"{array.dtype}{array.shape}".encode())
    hashed.update(array.tobytes())
  return hashed.hexdigest()[:16]


@dataclasses.dataclass(frozen=True)
class Decided:
  """The outcome of one example of an exhaustive search.

  Attributes:
    correct: the clean prediction equals the label.
    failed: a member of S(x) (x included) is misclassified.
    evaluated: members classified, x included.
    counterexample: the first misclassified member, or None.
    predicted: the class given ``counterexample`` (0 when there is none).
    seconds: the search's running time (over all its resumed parts) when the example was
      decided.
  """

  correct: bool
  failed: bool
  evaluated: int
  counterexample: Member | None
  predicted: int
  seconds: float


def to_record(outcome) -> dict[str, Any]:
  """A search's outcome (a dataclass with a ``counterexample`` member or None) as a JSON-ready
  journal line."""
  return {**dataclasses.asdict(outcome), "counterexample": None if outcome.counterexample is None
          else to_json(outcome.counterexample)}


def from_record(outcome: type, record: dict[str, Any]):
  """The ``outcome`` that :func:`to_record` wrote (its JSON lists back to tuples)."""
  values = {k: tuple(v) if isinstance(v, list) else v for k, v in record.items()}
  counterexample = record["counterexample"]
  return outcome(**{**values, "counterexample": None if counterexample is None
                    else from_json(counterexample)})


class Journal:
  """The decided examples of one exhaustive search, one JSON line each in ``path``.

  The file's first line is the search's key: whatever fixes its outcomes (the caller's part,
  e.g. a hash of the parameters, the data, split, space and lexicon, and the search's own:
  labels, certificates, shortcut). It names no path, so a run directory moved to another
  machine (with its progress file) resumes there. A file with another key belongs to another
  search (another checkpoint, space, ...): :meth:`start` moves it to ``path`` + ``.replaced``
  (replacing an older one there), starts the file afresh and logs what differs.

  Args:
    path: the file (its folder is created on the first write).
    key: the caller's part of the key, JSON-ready.
  """

  def __init__(self, path, key: dict[str, Any]):
    self.path = Path(path)
    self.key = key

  def start(self, search_key: dict[str, Any], outcome: type = Decided) -> dict[int, Any]:
    """The examples an earlier search with the same key decided (example index → outcome);
    an empty dict after (re)starting the file for this key.

    ``outcome``: the search's outcome type, a dataclass with a ``counterexample`` field
    (:func:`from_record`): :class:`Decided` for EX, the complete verifier's
    :class:`arc_jax.verify.Verdict`.
    """
    key = json.loads(json.dumps({**self.key, **search_key}))
    if self.path.is_file():
      lines = self.path.read_text().splitlines()
      try:
        stored = json.loads(lines[0]) if lines else None
      except json.JSONDecodeError:
        stored = None
      if stored == key:
        decided, kept = {}, [lines[0]]
        for line in lines[1:]:
          try:
            record = json.loads(line)
          except json.JSONDecodeError:  # cut short by a kill
            continue
          kept.append(line)
          index = record.pop("index")
          decided[index] = from_record(outcome, record)
        # Without the cut line, so that the next line appended starts a line of its own;
        # replaced in one step, so that a kill now loses nothing.
        rewritten = self.path.with_name(self.path.name + ".tmp")
        rewritten.write_text("".join(line + "\n" for line in kept))
        rewritten.replace(self.path)
        logger.info("Resuming the search from %s: %d examples already decided.",
                    self.path, len(decided))
        return decided
      # Kept aside, not overwritten: hours of an older search (e.g. under a setting whose
      # default changed since) come back by moving the file back and searching as it did.
      kept_aside = self.path.with_name(self.path.name + ".replaced")
      self.path.replace(kept_aside)
      logger.warning("%s holds the progress of another search (%s); starting over for this "
                     "one, the other's progress moved to %s.", self.path,
                     {k: v for k, v in (stored or {}).items() if key.get(k) != v}, kept_aside)
    self.path.parent.mkdir(parents=True, exist_ok=True)
    self.path.write_text(json.dumps(key) + "\n")
    return {}

  def append(self, decided: Iterable[tuple[int, Any]]) -> None:
    """Appends outcomes (flushed when this returns)."""
    lines = [json.dumps({"index": int(i), **to_record(d)}) + "\n" for i, d in decided]
    if lines:
      with self.path.open("a") as file:
        file.writelines(lines)

  def remove(self) -> None:
    """Deletes the file (the search's results are kept elsewhere)."""
    self.path.unlink(missing_ok=True)
