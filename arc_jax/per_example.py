"""The per-example table beside a results file: one row per example, in split order.

``test_Del2Sub2.json`` names its table ``test_Del2Sub2.examples.tsv.gz`` under
``"per_example_file"``: tab-separated, a header of column names, then integers (ids, labels,
|S(x)|, predictions, 0/1 outcomes) and floats (margins, in the shortest decimal that reads back
as the same float). It is gzipped without a timestamp, so identical tables are identical bytes.
Pure Python: the report reads it without starting JAX.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

SUFFIX = ".examples.tsv.gz"


def path_for(results_file) -> Path:
  """``test_Del2Sub2.json`` → ``test_Del2Sub2.examples.tsv.gz``."""
  results_file = Path(results_file)
  return results_file.with_name(results_file.name.removesuffix(".json") + SUFFIX)


def write(table: dict[str, list], path) -> None:
  """Writes ``table`` (columns of equal length) to ``path``."""
  lines = ["\t".join(table)] + ["\t".join(map(str, row)) for row in zip(*table.values())]
  with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0,
                                              filename="") as f:
    f.write(("\n".join(lines) + "\n").encode())


def has_table(results_file) -> bool:
  """Whether a results file names a per-example table (and it is there)."""
  results = json.loads(Path(results_file).read_text())
  name = results.get("per_example_file")
  return name is not None and (Path(results_file).parent / name).is_file()


def read(path) -> dict[str, list]:
  """The columns of the table at ``path``, or of the one a results file names."""
  path = Path(path)
  if not path.name.endswith(SUFFIX):
    path = path.parent / json.loads(path.read_text())["per_example_file"]
  with gzip.open(path, "rt") as f:
    header, *lines = f.read().splitlines()
  rows = [line.split("\t") for line in lines]
  return {name: [_number(row[i]) for row in rows] for i, name in enumerate(header.split("\t"))}


def _number(text: str) -> int | float:
  try:
    return int(text)
  except ValueError:
    return float(text)
