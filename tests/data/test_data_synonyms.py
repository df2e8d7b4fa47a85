"""Synonym lexicons and stop words."""

import pytest

from arc_jax import parse_space
from arc_jax.data import synonyms
from arc_jax.data.paths import DataFileNotFoundError
from tests.helpers.fake_data_root import data_root


def test_counterfitted_dedupes_and_drops_the_word_itself(data_root):
  lexicon = synonyms.load_synonyms(data_root=data_root)
  assert lexicon["good"] == ("great", "fine", "nonword")
  assert lexicon["film"] == ("movie",)
  assert "unused" not in lexicon  # no candidate


def test_restriction_to_a_vocabulary(data_root):
  vocab = {"good", "great", "film", "bad"}
  lexicon = synonyms.load_synonyms(vocabulary=vocab, data_root=data_root)
  assert lexicon == {"good": ("great",)}  # film → movie and bad → terrible leave the vocabulary
  assert synonyms.restrict_synonyms({"a": ["b", "c"], "z": ["a"]}, {"a", "c"}) == {"a": ("c",)}


def test_max_candidates_applies_before_the_vocabulary(data_root):
  assert synonyms.load_synonyms(max_candidates=1, data_root=data_root)["good"] == ("great",)
  # Like ARC's --use-fewer-sub: the first candidate is kept even if the vocabulary lacks it.
  assert "good" not in synonyms.load_synonyms(vocabulary={"good", "fine"}, max_candidates=1,
                                              data_root=data_root)
  with pytest.raises(ValueError, match="max_candidates"):
    synonyms.load_synonyms(max_candidates=0, data_root=data_root)


def test_ppdb_pairs_go_both_ways(data_root):
  lexicon = synonyms.load_synonyms("ppdb", data_root=data_root)
  assert lexicon == {"good": ("great", "fine"), "great": ("good",), "fine": ("good",),
                     "bad": ("terrible",), "terrible": ("bad",)}


def test_unknown_kind_and_missing_file(data_root, tmp_path):
  with pytest.raises(ValueError, match="Unknown synonym lexicon 'wordnet'.*counterfitted"):
    synonyms.load_synonyms("wordnet", data_root=data_root)
  with pytest.raises(DataFileNotFoundError, match="counterfitted_neighbors.*docs/DATA.md"):
    synonyms.load_synonyms(data_root=tmp_path)


def test_candidate_words_in_first_appearance_order():
  lexicon = {"good": ("great", "fine"), "bad": ("terrible", "good")}
  assert synonyms.candidate_words(lexicon, ["bad", "good", "bad"]) == [
      "bad", "good", "terrible", "great", "fine"]


def test_stopwords_and_space(data_root):
  stop = synonyms.load_stopwords(data_root)
  assert stop == ("a", "and", "the", "of", "to")
  space = parse_space("[(Del,1),(Sub,1)]", synonyms=synonyms.load_synonyms(data_root=data_root),
                      stopwords=stop)
  assert set(space.enumerate(("the", "film"))) == {
      ("the", "film"), ("film",), ("the", "movie"), ("movie",)}
