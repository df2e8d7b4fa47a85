"""A tiny fake data root with every file the data pipeline reads (the tests write it themselves).

Test modules import the fixtures they use from here.
"""

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

SST2_TRAIN = [
    ("it 's a charming and often affecting journey . ", 1),
    ("unflinchingly bleak and desperate ", 0),
    ("the movie ( a film ) is good ", 1),
    ("zyzzyva ", 0),  # no vector: becomes empty after the OOV filter
    ("a bad , bad film ", 0),
]
SST2_DEV = [("a good film ", 1), ("bleak and bad ", 0)]
# The A3T test file keeps PTB escapes; no newline at the end of the file.
SST2_TEST = "1 the movie -lrb- a film -rrb- is good\n0 bad \\/ bleak \\* film"

TREES = {
    "train.txt.gz": ["(3 (2 The) (4 (3 good) (2 film)))", "(1 (2 -LRB-) (1 (1 bad) (2 -RRB-)))",
                     "(2 (2 8\u00a01\\/2) (2 .))"],
    "dev.txt.gz": ["(4 (3 Good) (2 movie))"],
    "test.txt.gz": ["(0 (1 bleak) (0 zyzzyva))", "(2 (2 a) (2 film))"],
}

IMDB_TRAIN = [
    {"file": "neg/0_3.txt", "label": 0, "rating": 3,
     "text": "Bad film.<br /><br />I didn't like it."},
    {"file": "neg/1_1.txt", "label": 0, "rating": 1, "text": "Bleak... and \"bad\"!"},
    {"file": "pos/0_9.txt", "label": 1, "rating": 9, "text": "A good movie. Good!"},
]
IMDB_TEST = [
    {"file": "neg/0_2.txt", "label": 0, "rating": 2, "text": "Bad, bad movie."},
    {"file": "pos/0_10.txt", "label": 1, "rating": 10, "text": "Good film; good cast."},
]
IMDB_SPLITS = {"imdb_train_files.txt": ["pos/0_9.txt", "neg/0_3.txt"],
               "imdb_dev_files.txt": ["neg/1_1.txt"],
               "imdb_test_files.txt": ["pos/0_10.txt", "neg/0_2.txt"]}

VECTOR_WORDS = ["the", ",", "good", "film", "movie", "bad", "a", "and", "bleak", "(", ")", "is",
                "great", "fine", "terrible", "journey", ".", "it", "'s", "/", "*"]
DIM = 4

SYNONYMS = {"good": ["great", "fine", "good", "great", "nonword"], "bad": ["terrible"],
            "film": ["movie"], "movie": ["film"], "zyzzyva": ["good"], "unused": []}
PPDB_PAIRS = ["good great", "good fine", "bad terrible"]


def vector(i: int) -> list[float]:
  """The vector the fake file gives word number i."""
  return [round(i + 0.25 * d, 4) for d in range(DIM)]


def write_gzip_lines(path: Path, lines, trailing_newline=True):
  path.parent.mkdir(parents=True, exist_ok=True)
  text = "\n".join(lines) + ("\n" if trailing_newline else "")
  with gzip.open(path, "wt", encoding="utf-8") as f:
    f.write(text)


def write_data_root(root: Path) -> Path:
  """Writes every data file into ``root`` and returns it."""
  tsv = lambda rows: ["sentence\tlabel"] + [f"{s}\t{l}" for s, l in rows]
  write_gzip_lines(root / "sst2" / "train.tsv.gz", tsv(SST2_TRAIN))
  write_gzip_lines(root / "sst2" / "dev.tsv.gz", tsv(SST2_DEV))
  (root / "sst2" / "test.txt").write_text(SST2_TEST, encoding="utf-8")
  for name, lines in TREES.items():
    write_gzip_lines(root / "sst" / name, lines)
  write_gzip_lines(root / "imdb" / "train.jsonl.gz", [json.dumps(r) for r in IMDB_TRAIN])
  write_gzip_lines(root / "imdb" / "test.jsonl.gz", [json.dumps(r) for r in IMDB_TEST])
  for name, lines in IMDB_SPLITS.items():
    (root / "imdb" / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
  write_gzip_lines(root / "embeddings" / "w2v-movies.300d.txt.gz",
                   [" ".join([w] + [str(v) for v in vector(i)])
                    for i, w in enumerate(VECTOR_WORDS)])
  (root / "synonyms").mkdir(parents=True, exist_ok=True)
  with gzip.open(root / "synonyms" / "counterfitted_neighbors.json.gz", "wt") as f:
    json.dump(SYNONYMS, f)
  write_gzip_lines(root / "synonyms" / "counterfitting_ppdb2_synonyms.txt.gz", PPDB_PAIRS)
  (root / "stopwords.txt").write_text("a\nand\nthe\nof\nto\n", encoding="utf-8")
  return root


def use_random_sst2(tmp_path: Path, monkeypatch) -> list[tuple[str, int]]:
  """A fake data root in ``tmp_path / "root"`` whose SST-2 splits are 16 random 3-word
  sentences (dev: the first 8, test: the first 8), used through ``$ARC_DATA_DIR`` with a cache of
  its own; returns the (sentence, label) rows."""
  root = write_data_root(tmp_path / "root")
  rng = np.random.default_rng(0)
  words = ("the", "good", "bad", "film", "a", "movie")
  rows = [(" ".join(rng.choice(words, size=3)), int(rng.integers(2))) for _ in range(16)]
  tsv = ["sentence\tlabel"] + [f"{s} \t{l}" for s, l in rows]
  write_gzip_lines(root / "sst2" / "train.tsv.gz", tsv)
  write_gzip_lines(root / "sst2" / "dev.tsv.gz", tsv[:9])
  (root / "sst2" / "test.txt").write_text("\n".join(f"{l} {s}" for s, l in rows[:8]))
  monkeypatch.setenv("ARC_DATA_DIR", str(root))
  monkeypatch.setenv("ARC_CACHE_DIR", str(tmp_path / "cache"))
  return rows


@pytest.fixture(scope="session")
def data_root(tmp_path_factory) -> Path:
  """A fake data root shared by the session (do not modify it; copy it with write_data_root)."""
  return write_data_root(tmp_path_factory.mktemp("data_root"))


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
  """A cache folder shared by the session, so each tiny dataset is built once."""
  return tmp_path_factory.mktemp("cache")
