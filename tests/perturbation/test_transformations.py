"""Transformations as data: the standard library against docs/ORIGINAL.md §2, custom
transformations, reversal and vocabulary restriction (issue 2)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arc_jax.perturbation import STANDARD_NAMES, Transformation, custom, standard_transformation
from tests.helpers.reference_spaces import ALPHABET, REF_SIZES, STOP, lexicons, ref_replacements, sentences

FAST = settings(max_examples=60, deadline=None)


def windows(tokens, s):
  return [tuple(tokens[i:i + s]) for i in range(len(tokens) - s + 1)]


@pytest.mark.parametrize("name", STANDARD_NAMES)
@FAST
@given(tokens=sentences(max_len=8), synonyms=lexicons())
def test_standard_transformation_matches_reference(name, tokens, synonyms):
  """Every window's replacements are the reference set: distinct, non-identity, t tokens each."""
  t = standard_transformation(name, synonyms=synonyms)
  assert (t.name, t.s, t.t) == (name, *REF_SIZES[name])
  for w in windows(tokens, t.s):
    got = t.replacements(w)
    assert len(got) == len(set(got))
    assert set(got) == ref_replacements(name, w, synonyms)
    assert all(len(r) == t.t for r in got)


def test_del_stop_words_exactly_five():
  """Del deletes exactly a, and, the, of, to (and nothing else of the alphabet)."""
  dele = standard_transformation("Del")
  for w in ALPHABET + ("an", "The", "is", "in", "or"):
    assert dele.replacements((w,)) == (((),) if w in STOP else ())
  mine = standard_transformation("Del", stopwords={"is"})
  assert mine.replacements(("is",)) == ((),) and mine.replacements(("the",)) == ()


def test_review_transformations_examples():
  """Hand-checked cases of Trans1–Trans4 from the REFERENCE table."""
  t1, t2, t3, t4 = (standard_transformation(f"Trans{i}") for i in range(1, 5))
  assert set(t1.replacements(("this", "is"))) == {("it", "is"), ("this", "'s"), ("it", "'s")}
  assert t1.replacements(("that", "is")) == ()
  assert set(t2.replacements(("the", "movie"))) == {
      ("the", "film"), ("this", "movie"), ("this", "film"), ("a", "movie"), ("a", "film")}
  assert set(t2.replacements(("these", "films"))) == {
      ("these", "movies"), ("the", "movies"), ("the", "films")}
  assert t2.replacements(("these", "movie")) == () and t2.replacements(("a", "movies")) == ()
  assert t3.replacements(("one", "of", "the", "most")) == (("the", "most"),)
  assert t3.replacements(("one", "of", "the", "best")) == (("the", "best"),)
  assert t3.replacements(("one", "of", "the", "interest")) == (("the", "interest"),)  # as original
  assert t3.replacements(("one", "of", "the", "estimate")) == ()  # "est" must be the suffix
  assert t3.replacements(("one", "of", "a", "best")) == ()
  assert t3.replacements(("one", "of", "the", "good")) == ()
  assert t4.replacements(("!",)) == (("!", "!"),) and t4.replacements(("?",)) == (("?", "?"),)
  assert t4.replacements((".",)) == ()
  for name in ("Ins", "Dup"):
    assert standard_transformation(name).replacements(("movie",)) == (("movie", "movie"),)


def test_sub_candidates():
  """Sub drops self-synonyms and duplicates, keeps the lexicon's order; no candidate, no match."""
  sub = standard_transformation("Sub", synonyms={"good": ["fine", "good", "great", "fine"],
                                                  "same": ["same"], "none": []})
  assert sub.replacements(("good",)) == (("fine",), ("great",))
  assert sub.replacements(("same",)) == () and sub.replacements(("none",)) == ()
  assert sub.replacements(("unknown",)) == ()
  with pytest.raises(ValueError, match="synonym"):
    standard_transformation("Sub")


def test_window_length_and_replacement_length_checks():
  """A window of the wrong length never matches; a replacement of the wrong length is an error."""
  assert standard_transformation("Trans1").replacements(("this",)) == ()
  assert standard_transformation("Del").replacements(("the", "a")) == ()
  bad = custom("Bad", 1, 2, match=lambda w: True, replace=lambda w: [(w[0],)])
  with pytest.raises(ValueError, match="Bad"):
    bad.replacements(("x",))
  with pytest.raises(ValueError):
    Transformation("Zero", 0, 1, match=lambda w: True, replace=lambda w: [])
  with pytest.raises(ValueError):
    Transformation("Neg", 1, -1, match=lambda w: True, replace=lambda w: [])


def test_custom_swap():
  """The issue's custom transformation: swap two adjacent different tokens (2→2)."""
  swap = custom("Swap", 2, 2, match=lambda w: w[0] != w[1], replace=lambda w: [(w[1], w[0])])
  assert (swap.name, swap.s, swap.t) == ("Swap", 2, 2)
  assert swap.replacements(("a", "b")) == (("b", "a"),)
  assert swap.replacements(("a", "a")) == ()
  # Identity replacements are dropped even when the match function accepts the window.
  loose = custom("Loose", 2, 2, match=lambda w: True, replace=lambda w: [(w[1], w[0])])
  assert loose.replacements(("a", "a")) == ()


TRANSFORMATIONS = [standard_transformation(n, synonyms={"good": ["fine", "great"], "the": ["a"],
                                                         "movie": ["film"], "!": ["?"]})
                   for n in STANDARD_NAMES] + [
    custom("Swap", 2, 2, match=lambda w: w[0] != w[1], replace=lambda w: [(w[1], w[0])]),
    custom("Shorten", 2, 1, match=lambda w: w[0] == "the", replace=lambda w: [(w[1],)]),
    custom("Expand", 1, 3, match=lambda w: w[0] == "good",
           replace=lambda w: [("very", "very", "good"), ("not", "so", "good")]),
]


@pytest.mark.parametrize("t", TRANSFORMATIONS, ids=lambda t: t.name)
@FAST
@given(tokens=sentences(max_len=8))
def test_reversed_transformation(t, tokens):
  """T^R on a reversed window gives exactly the reversed replacements of T (same order)."""
  rev = t.reversed()
  assert (rev.name, rev.s, rev.t) == (t.name, t.s, t.t)
  for w in windows(tokens + ("good", "the", "!"), t.s):
    assert rev.replacements(w[::-1]) == tuple(r[::-1] for r in t.replacements(w))


@pytest.mark.parametrize("t", TRANSFORMATIONS, ids=lambda t: t.name)
@FAST
@given(tokens=sentences(max_len=8),
       vocab=st.sets(st.sampled_from(ALPHABET + ("fine", "great", "very", "not", "so"))))
def test_restricted_transformation(t, tokens, vocab):
  """T|V keeps the replacements made of V-words only (in order) and matches iff one is left."""
  kept = t.restricted_to(vocab)
  for w in windows(tokens + ("good", "the", "!"), t.s):
    want = tuple(r for r in t.replacements(w) if set(r) <= vocab)
    assert kept.replacements(w) == want
    assert bool(kept.match(w)) == bool(want)
