"""Integration: the real data of shared/data, built into a fresh cache (about 20 s).

Skipped when the real data cannot be found (see arc_jax.data.paths for where it is searched).
The full IMDB build (about a minute of tokenising 50,000 reviews) is marked slow; the fast test
checks the split files against the reviews instead.
"""

import collections

import pytest

from arc_jax.data import datasets, paths, prepare_lstm_data

try:
  REAL_ROOT = paths.find_data_file("sst2/train.tsv.gz").parents[1]
except paths.DataFileNotFoundError as missing:
  pytest.skip(f"real data not found: {missing}", allow_module_level=True)


@pytest.fixture(scope="module")
def real_cache(tmp_path_factory):
  return tmp_path_factory.mktemp("real_cache")


def test_sst2_sizes_and_labels(real_cache):
  sst2 = datasets.load_sst2(REAL_ROOT, real_cache)
  assert {k: len(v) for k, v in sst2.items()} == {"train": 67349, "validation": 872, "test": 1821}
  assert collections.Counter(e.label for e in sst2["train"]) == {1: 37569, 0: 29780}
  assert collections.Counter(e.label for e in sst2["validation"]) == {1: 444, 0: 428}
  assert collections.Counter(e.label for e in sst2["test"]) == {1: 909, 0: 912}
  test_words = {w for e in sst2["test"] for w in e.tokens}
  assert "(" in test_words and not test_words & {"-lrb-", "-rrb-", "\\/", "\\*"}


def test_sst_tree_sizes_and_root_labels(real_cache):
  trees = datasets.load_sst_trees(REAL_ROOT, real_cache)
  roots = {split: collections.Counter(t.label for t in ts) for split, ts in trees.items()}
  assert {k: len(v) for k, v in trees.items()} == {"train": 8544, "validation": 1101,
                                                    "test": 2210}
  assert [roots["train"][c] for c in range(5)] == [1092, 2218, 1624, 2322, 1288]
  assert [roots["validation"][c] for c in range(5)] == [139, 289, 229, 279, 165]
  assert [roots["test"][c] for c in range(5)] == [279, 633, 389, 510, 399]
  assert trees["validation"][0].tokens[:2] == ("it", "'s")


def test_imdb_split_files_match_the_reviews():
  folder = REAL_ROOT / "imdb"
  listed = {split: (folder / name).read_text().split()
            for split, name in datasets.ArcImdb.SPLIT_FILES.items()}
  assert {k: len(v) for k, v in listed.items()} == {"train": 20000, "validation": 5000,
                                                    "test": 25000}
  train_reviews = datasets._read_reviews(folder / "train.jsonl.gz")
  test_reviews = datasets._read_reviews(folder / "test.jsonl.gz")
  assert not set(listed["train"]) & set(listed["validation"])
  assert set(listed["train"]) | set(listed["validation"]) == set(train_reviews)
  assert set(listed["test"]) == set(test_reviews)
  assert all(train_reviews[f][0] == f.startswith("pos/") for f in listed["train"][:1000])


def test_lstm_data_coverage(real_cache):
  data = prepare_lstm_data(data_root=REAL_ROOT, cache_dir=real_cache)
  test = data.stats["splits"]["test"]
  assert test["examples"] == 1821 and test["empty"] == []
  assert test["token_coverage"] > 0.98 and test["type_coverage"] > 0.92
  assert data.embeddings.shape[1] == 300 and len(data.synonyms) > 10000


@pytest.mark.slow
def test_imdb_build(real_cache):
  imdb = datasets.load_imdb(REAL_ROOT, real_cache)
  assert {k: len(v) for k, v in imdb.items()} == {"train": 20000, "validation": 5000,
                                                  "test": 25000}
  assert collections.Counter(e.label for e in imdb["test"]) == {0: 12500, 1: 12500}
