"""The TFDS builders on tiny data: contents, order, caching, error messages."""

import concurrent.futures
import gzip
import os
import sys
import threading
import time

import pytest

from arc_jax.data import datasets
from arc_jax.data.paths import DataFileNotFoundError
from arc_jax.data.trees import parse_tree
from tests.helpers.fake_data_root import (IMDB_SPLITS, SST2_DEV, SST2_TRAIN, TREES, cache_dir, data_root,
                            write_data_root)


def test_sst2_splits_tokens_and_order(data_root, cache_dir):
  sst2 = datasets.load_sst2(data_root, cache_dir)
  assert {k: len(v) for k, v in sst2.items()} == {"train": 5, "validation": 2, "test": 2}
  assert [e.label for e in sst2["train"]] == [label for _, label in SST2_TRAIN]
  assert sst2["train"][2] == datasets.Example(
      ("the", "movie", "(", "a", "film", ")", "is", "good"), 1)
  assert [" ".join(e.tokens) for e in sst2["validation"]] == [s.strip() for s, _ in SST2_DEV]
  # The test file's PTB escapes are spelled as in the GLUE text.
  assert sst2["test"][0].tokens == sst2["train"][2].tokens
  assert sst2["test"][1] == datasets.Example(("bad", "/", "bleak", "*", "film"), 0)


def test_raw_parsing_matches_tfds_decoding(data_root, cache_dir):
  builder = datasets.prepare_builder(datasets.ArcSstTrees, data_root, cache_dir)
  decoded = builder.as_data_source(split="train")[0]
  raw = datasets.read_split(builder, "train")[0]
  assert decoded["tokens"].decode() == raw["tokens"].bytes_list.value[0].decode()
  for key in ("left", "right", "labels"):
    assert decoded[key].tolist() == list(raw[key].int64_list.value)


def test_sst_trees(data_root, cache_dir):
  trees = datasets.load_sst_trees(data_root, cache_dir)
  names = {"train": "train.txt.gz", "validation": "dev.txt.gz", "test": "test.txt.gz"}
  for split, name in names.items():
    assert trees[split] == [parse_tree(line) for line in TREES[name]]
  assert trees["train"][1].tokens == ("(", "bad", ")")
  assert trees["train"][2].tokens == ("8\u00a01/2", ".")


def test_imdb_follows_split_files(data_root, cache_dir):
  imdb = datasets.load_imdb(data_root, cache_dir)
  assert {k: len(v) for k, v in imdb.items()} == {
      "train": len(IMDB_SPLITS["imdb_train_files.txt"]),
      "validation": len(IMDB_SPLITS["imdb_dev_files.txt"]),
      "test": len(IMDB_SPLITS["imdb_test_files.txt"])}
  assert imdb["train"][0] == datasets.Example(("a", "good", "movie", ".", "good", "!"), 1)
  assert imdb["train"][1] == datasets.Example(
      ("bad", "film", ".", "i", "did", "n't", "like", "it", "."), 0)
  assert imdb["validation"][0].tokens == ("bleak", "...", "and", "``", "bad", "''", "!")
  assert [e.label for e in imdb["test"]] == [1, 0]


def test_second_load_reuses_the_cache(data_root, cache_dir, monkeypatch):
  datasets.load_sst2(data_root, cache_dir)

  def fail(*args, **kwargs):
    raise AssertionError("rebuilt although cached")

  monkeypatch.setattr(datasets.ArcSst2, "_generate_examples", fail)
  assert len(datasets.load_sst2(data_root, cache_dir)["train"]) == len(SST2_TRAIN)


def test_loads_at_once_on_a_fresh_cache_build_it_once(data_root, tmp_path, monkeypatch):
  # Two runs started together used to both build, and the second failed moving its copy into
  # place; now one builds while the other waits for the lock, then reads what was built.
  original = datasets.ArcSst2._generate_examples
  builders = []  # the thread of every split generated

  def slow(self, *args, **kwargs):
    builders.append(threading.get_ident())
    time.sleep(0.5)  # the other load starts meanwhile
    yield from original(self, *args, **kwargs)

  monkeypatch.setattr(datasets.ArcSst2, "_generate_examples", slow)
  with concurrent.futures.ThreadPoolExecutor(2) as pool:
    loads = list(pool.map(lambda _: datasets.load_sst2(data_root, tmp_path / "cache"), range(2)))
  assert len(set(builders)) == 1 and len(builders) == 3
  assert loads[0] == loads[1] and len(loads[0]["train"]) == len(SST2_TRAIN)


def test_edited_data_is_rebuilt(tmp_path):
  root = write_data_root(tmp_path / "root")
  assert len(datasets.load_sst2(root, tmp_path / "cache")["validation"]) == 2
  with gzip.open(root / "sst2" / "dev.tsv.gz", "wt") as f:
    f.write("sentence\tlabel\nonly one \t1\n")
  os.utime(root / "sst2" / "dev.tsv.gz", ns=(1, 1))
  assert datasets.load_sst2(root, tmp_path / "cache")["validation"] == [
      datasets.Example(("only", "one"), 1)]


def test_missing_dataset_file_error(tmp_path):
  root = write_data_root(tmp_path / "root")
  (root / "imdb" / "imdb_dev_files.txt").unlink()
  with pytest.raises(DataFileNotFoundError, match=r"imdb/imdb_dev_files\.txt.*aclImdb"):
    datasets.load_imdb(root, tmp_path / "cache")


@pytest.mark.parametrize("path, content, message", [
    ("sst2/dev.tsv.gz", "sentence\tlabel\ngood \t2\n", r"dev\.tsv\.gz, line 2: label '2'"),
    ("sst2/dev.tsv.gz", "text\tlabel\n", "GLUE header"),
    ("sst2/test.txt", "1 fine\nno-label-here", r"test\.txt, line 2: expected '<label> <sentence>'"),
    ("sst/dev.txt.gz", "(4 (3 a) (2 b)\n", r"dev\.txt\.gz, line 1: Unbalanced"),
    ("imdb/imdb_dev_files.txt", "pos/0_9.txt\nneg/404_1.txt\n",
     r"imdb_dev_files\.txt, line 2: 'neg/404_1\.txt' is not a review"),
])
def test_malformed_files_name_file_and_line(tmp_path, path, content, message):
  root = write_data_root(tmp_path / "root")
  if path.endswith(".gz"):
    with gzip.open(root / path, "wt") as f:
      f.write(content)
  else:
    (root / path).write_text(content)
  loader = {"sst2": datasets.load_sst2, "sst": datasets.load_sst_trees,
            "imdb": datasets.load_imdb}[path.split("/")[0]]
  with pytest.raises(ValueError, match=message):
    loader(root, tmp_path / "cache")


def test_loading_never_imports_tensorflow(data_root, cache_dir):
  datasets.load_sst_trees(data_root, cache_dir)
  assert "tensorflow" not in sys.modules
