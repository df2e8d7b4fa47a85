"""Copies what LSTM experiments read from the data folder into a smaller one: ``python
experiments/slim_data.py OUT [--dataset sst2] [--synonyms ppdb] [--max-candidates 1 0]``.

For a machine the data must be sent to (a lent GPU, a cluster node with an upload limit): the
word vectors (38 MB) are cut to the words of the experiments' vocabularies, the dataset, lexicon
and stop-word files are copied as they are. Each preparation (one per ``--max-candidates``) from
OUT is then checked against the same preparation from the data folder: the same vocabulary,
embedding matrix, lexicon and OOV report, so a run trained on OUT resumes and is evaluated on the
whole data folder (checkpoints carry the data's fingerprint). Train on it with
``ARC_DATA_DIR=OUT``. Tree-LSTM data is not covered (its vocabulary keeps words without vectors).
"""

import argparse
import gzip
import shutil
import sys
from pathlib import Path

import numpy as np

from arc_jax.data import paths, prepare_lstm_data
from arc_jax.data.embeddings import DEFAULT_VECTORS

COPIED = ("synonyms", "stopwords.txt")


def slim_data(out: Path, dataset: str, synonyms: str, max_candidates: list[int | None],
              data_root: Path | None = None) -> int:
  """Writes OUT and checks it; returns the number of vectors kept.

  Raises:
    RuntimeError: a preparation from OUT differs from the one from the data folder.
  """
  root = paths.data_folder(data_root)
  settings = [dict(dataset=dataset, synonyms=synonyms, max_candidates=m) for m in max_candidates]
  full = [prepare_lstm_data(**s, data_root=root) for s in settings]
  words = set().union(*(data.vocab for data in full))
  (out / DEFAULT_VECTORS).parent.mkdir(parents=True, exist_ok=True)
  kept = 0
  with gzip.open(root / DEFAULT_VECTORS, "rt") as source, \
       gzip.open(out / DEFAULT_VECTORS, "wt") as target:
    for line in source:
      if line.split(" ", 1)[0] in words:
        target.write(line)
        kept += 1
  for name in (dataset,) + COPIED:
    if (root / name).is_dir():
      shutil.copytree(root / name, out / name, dirs_exist_ok=True)
    elif (root / name).is_file():
      shutil.copy2(root / name, out / name)
  for setting, data in zip(settings, full):
    slim = prepare_lstm_data(**setting, data_root=out)
    same = (slim.vocab == data.vocab and np.array_equal(slim.embeddings, data.embeddings)
            and slim.synonyms == data.synonyms and slim.stats["splits"] == data.stats["splits"])
    if not same:
      raise RuntimeError(f"{out} prepares other data than {root} for {setting}; do not use it.")
  return kept


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("out", type=Path, help="the folder to write (created)")
  parser.add_argument("--dataset", default="sst2", choices=("sst2", "imdb"))
  parser.add_argument("--synonyms", default="ppdb", choices=("ppdb", "counterfitted"))
  parser.add_argument("--max-candidates", type=int, nargs="+", default=[1, 0],
                      help="the lexicons to cover: candidates per word, 0 for all (default: 1, "
                      "the ARC rows, and 0, S_review)")
  parser.add_argument("--data-root", type=Path, help="default: the data folder (arc_jax.data)")
  args = parser.parse_args(argv)
  try:
    kept = slim_data(args.out, args.dataset, args.synonyms,
                     [m or None for m in args.max_candidates], args.data_root)
  except RuntimeError as error:
    print(f"error: {error}", file=sys.stderr)
    return 1
  size = sum(p.stat().st_size for p in args.out.rglob("*") if p.is_file())
  print(f"wrote {args.out}: {kept} word vectors, {size / 2**20:.1f} MB; every preparation checked "
        "equal to the data folder's")
  return 0


if __name__ == "__main__":
  sys.exit(main())
