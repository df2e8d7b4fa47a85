"""Reading GloVe-format vectors, the vocabulary and its cache, and the OOV policy."""

import gzip
import logging
import os

import numpy as np
import pytest

from arc_jax.data import embeddings
from tests.helpers.fake_data_root import DIM, VECTOR_WORDS, data_root, vector


def _write(path, lines):
  opener = gzip.open if path.suffix == ".gz" else open
  with opener(path, "wt", encoding="utf-8") as f:
    f.write("\n".join(lines) + "\n")
  return path


@pytest.mark.parametrize("name", ["vectors.txt", "vectors.txt.gz"])
def test_read_vectors_plain_or_gzip(tmp_path, name):
  path = _write(tmp_path / name, ["b 1 2 3", "a 4 5 6", "c 7 8 9"])
  words, matrix = embeddings.read_vectors(path, ["c", "a", "unknown"])
  assert words == ["a", "c"]  # file order
  np.testing.assert_array_equal(matrix, [[4, 5, 6], [7, 8, 9]])
  assert matrix.dtype == np.float32


def test_read_vectors_header_spaces_and_duplicates(tmp_path):
  path = _write(tmp_path / "v.txt", [
      "3 2",  # word2vec header
      ". . . 0.5 0.5",  # a word with spaces (GloVe 840B): wrong field count, skipped
      ". 1 2",
      "x 3 4",
      "x 5 6",  # duplicate: the first one wins
      "caf\u00e9 7 8",
  ])
  words, matrix = embeddings.read_vectors(path, [".", "x", "caf\u00e9"])
  assert words == [".", "x", "caf\u00e9"]
  np.testing.assert_array_equal(matrix, [[1, 2], [3, 4], [7, 8]])
  assert embeddings.read_vectors(path, ["none"])[1].shape == (0, 2)


def test_read_vectors_dimension_from_first_line(tmp_path):
  path = _write(tmp_path / "v.txt", ["", "a 1 2 3", "b 1 2", "c 4 5 6"])
  words, matrix = embeddings.read_vectors(path, ["a", "b", "c"])
  assert words == ["a", "c"] and matrix.shape == (2, 3)


def test_read_vectors_rejects_empty_file(tmp_path):
  with pytest.raises(ValueError, match="holds no vectors"):
    embeddings.read_vectors(_write(tmp_path / "empty.txt", []), ["a"])


def test_vocab_in_file_order_with_zero_padding_row(data_root, tmp_path):
  emb = embeddings.build_vocab_and_embeddings(["film", "good", "nonword", "the"],
                                              data_root=data_root, cache_dir=tmp_path)
  assert list(emb.vocab) == ["the", "good", "film"]  # vector-file order
  assert list(emb.vocab.values()) == [1, 2, 3]
  assert emb.missing == ("nonword",)
  assert emb.matrix.shape == (4, DIM) and emb.matrix.dtype == np.float32
  np.testing.assert_array_equal(emb.matrix[0], 0)
  np.testing.assert_allclose(emb.matrix[emb.vocab["film"]], vector(VECTOR_WORDS.index("film")))
  assert emb.source.name == "w2v-movies.300d.txt.gz"


def test_words_without_vectors_can_be_kept_with_zero_rows(data_root, tmp_path):
  emb = embeddings.build_vocab_and_embeddings(
      ["zz", "film", "yy", "nonword"], keep_without_vectors={"zz", "yy"}, data_root=data_root,
      cache_dir=tmp_path)
  assert list(emb.vocab) == ["film", "zz", "yy"]
  np.testing.assert_array_equal(emb.matrix[emb.vocab["zz"]], 0)
  assert emb.missing == ("zz", "yy", "nonword")


def test_second_build_reads_the_cache(data_root, tmp_path, monkeypatch):
  first = embeddings.build_vocab_and_embeddings(["good", "bad", "nonword"], data_root=data_root,
                                                cache_dir=tmp_path)
  assert len(list((tmp_path / "embeddings").glob("*.npz"))) == 1
  monkeypatch.setattr(embeddings, "read_vectors", lambda *a: pytest.fail("parsed again"))
  second = embeddings.build_vocab_and_embeddings(["good", "bad", "nonword"], data_root=data_root,
                                                 cache_dir=tmp_path)
  assert second.vocab == first.vocab and second.missing == first.missing
  np.testing.assert_array_equal(second.matrix, first.matrix)


def test_cache_key_follows_words_and_file(tmp_path):
  path = _write(tmp_path / "v.txt", ["a 1", "b 2"])
  build = lambda words: embeddings.build_vocab_and_embeddings(words, path,
                                                              cache_dir=tmp_path / "c")
  assert list(build(["a"]).vocab) == ["a"]
  assert list(build(["a", "b"]).vocab) == ["a", "b"]
  _write(path, ["a 10", "b 20"])
  os.utime(path, ns=(1, 1))
  np.testing.assert_array_equal(build(["a"]).matrix, [[0], [10]])
  assert len(list((tmp_path / "c" / "embeddings").glob("v-*.npz"))) == 3


def test_explicit_missing_vector_file(tmp_path):
  with pytest.raises(FileNotFoundError, match=r"glove\.6B\.300d\.txt does not exist.*GloVe"):
    embeddings.build_vocab_and_embeddings(["a"], tmp_path / "glove.6B.300d.txt",
                                          cache_dir=tmp_path)


def test_drop_oov_counts_and_keeps_empty_sentences(caplog):
  vocab = {"good": 1, "film": 2}
  sentences = [("good", "film"), ("zz", "good", "zz"), ("zz", "yy"), ()]
  with caplog.at_level(logging.INFO, logger="arc_jax.data.embeddings"):
    filtered, report = embeddings.drop_oov(sentences, vocab, "toy")
  assert filtered == [("good", "film"), ("good",), (), ()]
  assert (report.tokens, report.types, report.dropped) == (7, 4, 4)
  assert report.dropped_types == {"zz", "yy"}
  assert report.empty == (2,)  # sentence 3 was empty before filtering
  assert report.token_coverage == pytest.approx(3 / 7)
  assert report.type_coverage == pytest.approx(0.5)
  [record] = caplog.records
  assert record.levelno == logging.WARNING
  assert "toy: 4 of 7 tokens" in record.getMessage() and "indices [2]" in record.getMessage()


def test_drop_oov_logs_info_when_nothing_becomes_empty(caplog):
  with caplog.at_level(logging.INFO, logger="arc_jax.data.embeddings"):
    filtered, report = embeddings.drop_oov([("a", "b")], {"a"})
  assert filtered == [("a",)] and report.empty == ()
  assert caplog.records[0].levelno == logging.INFO
