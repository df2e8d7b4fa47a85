"""SST-2, SST trees and IMDB as TFDS datasets (array_record, no TensorFlow needed).

Each dataset is a ``tfds.core.GeneratorBasedBuilder`` over its files in the data folder
(``REQUIRED_FILES`` under ``FOLDER``; docs/DATA.md), which a download folder fetches first from a
mirror or from their public sources (:mod:`arc_jax.data.fetch`, its ``checksums.tsv``). It is
built once into ``<cache_dir>/tfds/<fingerprint>/``, where the fingerprint
hashes the manual files' paths, sizes and modification times and the builder version, so edited
data is rebuilt and never read stale; processes started at once build it once, the others wait on
a lock file beside it. Splits keep the order of their source files
(``disable_shuffling``) and are named ``train``, ``validation`` and ``test`` throughout.

Examples are read back through the builder's TFDS data source as raw records and parsed with the
``tf.train.Example`` proto that TFDS ships (``tensorflow_datasets.proto``): the same bytes TFDS
decodes, without its per-feature Python decoding, which dominates the read time (measured in
benchmarks/README.md).
"""

from __future__ import annotations

import gzip
import json
import logging
import os
from pathlib import Path
from typing import Iterator, NamedTuple

import numpy as np
import tensorflow_datasets as tfds
from tensorflow_datasets.proto import tf_example_pb2

from arc_jax.data import paths
from arc_jax.data.locks import exclusively
from arc_jax.data.tokenize import review_tokens, whitespace_tokens
from arc_jax.data.trees import Tree, parse_tree

SPLITS = ("train", "validation", "test")

logger = logging.getLogger(__name__)


class Example(NamedTuple):
  """A tokenised, labelled text."""

  tokens: tuple[str, ...]
  label: int


def _text_lines(path: Path) -> Iterator[str]:
  opener = gzip.open if path.suffix == ".gz" else open
  with paths.reading(path), opener(path, "rt", encoding="utf-8") as f:
    for line in f:
      yield line.rstrip("\r\n")


def _bad_line(path: Path, number: int, why: str) -> paths.DataFileError:
  return paths.DataFileError(f"{path}, line {number}: {why}. Is this the file docs/DATA.md "
                             "describes?")


def _binary_label(text: str, path: Path, number: int) -> int:
  if text not in ("0", "1"):
    raise _bad_line(path, number, f"label {text!r} is not 0 or 1")
  return int(text)


class _LocalFilesBuilder(tfds.core.GeneratorBasedBuilder, skip_registration=True):
  """A builder of files in the data folder (fetched before it runs, :func:`prepare_builder`), so
  TFDS's "Downloading and preparing dataset" lines are replaced by one log line saying what is
  built where."""

  # TFDS 4.9.10 locates a package builder's checksums file through `importlib_resources`, which
  # it does not install on Python >= 3.9; the fetch layer reads arc_jax/data/checksums.tsv.
  code_path = None

  def _log_download_bytes(self) -> None:
    logger.info("Building the %s dataset (once; later runs reuse it) into %s.", self.name,
                self.data_dir)

  def _log_download_done(self) -> None:
    pass


class ArcSst2(_LocalFilesBuilder, skip_registration=True):
  """SST-2: GLUE train (67,349 phrases) and dev (872), and the paper's 1,821-sentence test set."""

  VERSION = tfds.core.Version("1.0.0")
  FOLDER = "sst2"
  SPLIT_FILES = {"train": "train.tsv.gz", "validation": "dev.tsv.gz", "test": "test.txt"}
  REQUIRED_FILES = tuple(SPLIT_FILES.values())
  MANUAL_DOWNLOAD_INSTRUCTIONS = (
      "Place GLUE's SST-2 train.tsv.gz and dev.tsv.gz and A3T's sst2test.txt (as test.txt) in "
      "<data root>/sst2/ (docs/DATA.md).")

  def _info(self) -> tfds.core.DatasetInfo:
    return tfds.core.DatasetInfo(
        builder=self,
        description="SST-2 as used by ARC; tokens lower-cased, PTB escapes undone, space-joined.",
        features=tfds.features.FeaturesDict({
            "tokens": tfds.features.Text(),
            "label": tfds.features.ClassLabel(names=["negative", "positive"]),
        }),
        disable_shuffling=True,
    )

  def _split_generators(self, dl_manager):
    folder = Path(dl_manager.manual_dir)
    return {split: self._generate_examples(folder / name, glue=split != "test")
            for split, name in self.SPLIT_FILES.items()}

  def _generate_examples(self, path: Path, glue: bool):
    lines = _text_lines(path)
    if glue and next(lines, None) != "sentence\tlabel":
      raise _bad_line(path, 1, "expected the GLUE header 'sentence<TAB>label'")
    for number, line in enumerate(lines, start=2 if glue else 1):
      if glue:
        sentence, sep, label = line.rpartition("\t")
      else:
        label, sep, sentence = line.partition(" ")
      if not sep:
        raise _bad_line(path, number, "expected '<sentence>\\t<label>'" if glue
                        else "expected '<label> <sentence>'")
      tokens = whitespace_tokens(sentence)
      yield number, {"tokens": " ".join(tokens), "label": _binary_label(label, path, number)}


class ArcSstTrees(_LocalFilesBuilder, skip_registration=True):
  """SST five-class binary trees (8,544 / 1,101 / 2,210), a label on every node."""

  VERSION = tfds.core.Version("1.0.0")
  FOLDER = "sst"
  SPLIT_FILES = {"train": "train.txt.gz", "validation": "dev.txt.gz", "test": "test.txt.gz"}
  REQUIRED_FILES = tuple(SPLIT_FILES.values())
  MANUAL_DOWNLOAD_INSTRUCTIONS = (
      "Place the SST trees train/dev/test.txt.gz (trainDevTestTrees_PTB) in <data root>/sst/ "
      "(docs/DATA.md).")

  def _info(self) -> tfds.core.DatasetInfo:
    node_array = tfds.features.Tensor(shape=(None,), dtype=np.int32)
    return tfds.core.DatasetInfo(
        builder=self,
        description="SST trees in post-order: leaf words (lower-cased, PTB escapes undone, "
                    "space-joined), left/right child per node (-1 at leaves), label per node.",
        features=tfds.features.FeaturesDict({
            "tokens": tfds.features.Text(), "left": node_array, "right": node_array,
            "labels": node_array,
        }),
        disable_shuffling=True,
    )

  def _split_generators(self, dl_manager):
    folder = Path(dl_manager.manual_dir)
    return {split: self._generate_examples(folder / name)
            for split, name in self.SPLIT_FILES.items()}

  def _generate_examples(self, path: Path):
    for number, line in enumerate(_text_lines(path), start=1):
      if not line.strip():
        continue
      try:
        tree = parse_tree(line)
      except ValueError as e:
        raise _bad_line(path, number, str(e)) from None
      yield number, {
          "tokens": " ".join(tree.tokens),
          **{k: np.asarray(getattr(tree, k), np.int32) for k in ("left", "right", "labels")},
      }


class ArcImdb(_LocalFilesBuilder, skip_registration=True):
  """IMDB (aclImdb v1) with the paper's 20,000 / 5,000 / 25,000 split files."""

  VERSION = tfds.core.Version("1.0.0")
  FOLDER = "imdb"
  SPLIT_FILES = {"train": "imdb_train_files.txt", "validation": "imdb_dev_files.txt",
                 "test": "imdb_test_files.txt"}
  REVIEW_FILES = {"train": "train.jsonl.gz", "validation": "train.jsonl.gz",
                  "test": "test.jsonl.gz"}
  REQUIRED_FILES = (*SPLIT_FILES.values(), "train.jsonl.gz", "test.jsonl.gz")
  MANUAL_DOWNLOAD_INSTRUCTIONS = (
      "Place train.jsonl.gz, test.jsonl.gz (aclImdb reviews as JSON lines with keys file, label, "
      "text) and imdb_{train,dev,test}_files.txt in <data root>/imdb/ "
      "(docs/DATA.md).")

  def _info(self) -> tfds.core.DatasetInfo:
    return tfds.core.DatasetInfo(
        builder=self,
        description="IMDB reviews: <br /> removed, Treebank tokens, lower-cased, space-joined; "
                    "file is the aclImdb name such as pos/0_9.txt.",
        features=tfds.features.FeaturesDict({
            "tokens": tfds.features.Text(),
            "label": tfds.features.ClassLabel(names=["negative", "positive"]),
            "file": tfds.features.Text(),
        }),
        disable_shuffling=True,
    )

  def _split_generators(self, dl_manager):
    folder = Path(dl_manager.manual_dir)
    reviews = {name: _read_reviews(folder / name) for name in set(self.REVIEW_FILES.values())}
    return {split: self._generate_examples(folder / listing, reviews[self.REVIEW_FILES[split]])
            for split, listing in self.SPLIT_FILES.items()}

  def _generate_examples(self, listing: Path, reviews: dict[str, tuple[int, str]]):
    for number, name in enumerate(_text_lines(listing), start=1):
      if not name.strip():
        continue
      if name not in reviews:
        raise _bad_line(listing, number, f"{name!r} is not a review of the matching jsonl file")
      label, text = reviews[name]
      yield number, {"tokens": " ".join(review_tokens(text)), "label": label, "file": name}


def _read_reviews(path: Path) -> dict[str, tuple[int, str]]:
  """file name (e.g. ``pos/0_9.txt``) → (label, raw text) from a JSON-lines file."""
  out = {}
  for number, line in enumerate(_text_lines(path), start=1):
    row = json.loads(line)
    if not {"file", "label", "text"} <= row.keys():
      raise _bad_line(path, number, "expected the keys 'file', 'label' and 'text'")
    out[row["file"]] = (_binary_label(str(row["label"]), path, number), row["text"])
  return out


def prepare_builder(builder_class: type[tfds.core.GeneratorBasedBuilder],
                    data_root: str | os.PathLike | None = None,
                    cache_dir: str | os.PathLike | None = None) -> tfds.core.GeneratorBasedBuilder:
  """Builds (once) and returns the TFDS builder of one dataset.

  Args:
    builder_class: :class:`ArcSst2`, :class:`ArcSstTrees` or :class:`ArcImdb`.
    data_root: folder holding the dataset's ``FOLDER``; default: the search path of
      :mod:`arc_jax.data.paths`.
    cache_dir: cache folder; default ``$ARC_CACHE_DIR`` or ``~/.cache/arc_jax``.
  """
  manual_dir = paths.find_dataset_dir(builder_class.FOLDER, builder_class.REQUIRED_FILES,
                                      data_root)
  fingerprint = paths.file_fingerprint([manual_dir / f for f in builder_class.REQUIRED_FILES],
                                       builder_class.__name__, str(builder_class.VERSION))
  data_dir = paths.cache_dir(cache_dir) / "tfds" / fingerprint
  # TFDS's own bars are off while building: a bad file ends them mid-line, under the one-line
  # error that names it; the builder logs one line instead (_LocalFilesBuilder).
  tfds.display_progress_bar(False)
  try:
    # The builder reads what is built when it is made, so it is made under the lock too.
    with exclusively(data_dir.with_name(fingerprint + ".lock")):
      builder = builder_class(data_dir=data_dir, file_format="array_record")
      builder.download_and_prepare(
          download_config=tfds.download.DownloadConfig(manual_dir=manual_dir))
  finally:
    tfds.display_progress_bar(True)
  return builder


def read_split(builder: tfds.core.GeneratorBasedBuilder, split: str) -> list:
  """The split's examples as ``tf.train.Example`` feature maps (name → Feature proto)."""
  source = builder.as_data_source(split=split,
                                  deserialize_method=tfds.decode.DeserializeMethod.RAW_BYTES)
  records = source.__getitems__(range(len(source)))
  return [tf_example_pb2.Example.FromString(r).features.feature for r in records]


def _text(feature) -> str:
  return feature.bytes_list.value[0].decode("utf-8")


def _int(feature) -> int:
  return int(feature.int64_list.value[0])


def load_sst2(data_root: str | os.PathLike | None = None,
              cache_dir: str | os.PathLike | None = None) -> dict[str, list[Example]]:
  """SST-2 splits: train (67,349), validation (872) and test (1,821), file order."""
  builder = prepare_builder(ArcSst2, data_root, cache_dir)
  return {split: [Example(tuple(_text(f["tokens"]).split()), _int(f["label"]))
                  for f in read_split(builder, split)] for split in SPLITS}


def load_imdb(data_root: str | os.PathLike | None = None,
              cache_dir: str | os.PathLike | None = None) -> dict[str, list[Example]]:
  """IMDB splits: train (20,000), validation (5,000) and test (25,000), split-file order."""
  builder = prepare_builder(ArcImdb, data_root, cache_dir)
  return {split: [Example(tuple(_text(f["tokens"]).split()), _int(f["label"]))
                  for f in read_split(builder, split)] for split in SPLITS}


def load_sst_trees(data_root: str | os.PathLike | None = None,
                   cache_dir: str | os.PathLike | None = None) -> dict[str, list[Tree]]:
  """SST tree splits: train (8,544), validation (1,101) and test (2,210), file order."""
  builder = prepare_builder(ArcSstTrees, data_root, cache_dir)
  # split(" "): three leaves hold a no-break space ("8\u00a01/2"), which str.split() would cut.
  return {split: [Tree(tuple(_text(f["tokens"]).split(" ")),
                       *(tuple(f[k].int64_list.value) for k in ("left", "right", "labels")))
                  for f in read_split(builder, split)] for split in SPLITS}
