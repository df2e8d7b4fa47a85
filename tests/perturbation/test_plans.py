"""Certification plans: array layout, match and replacement sets against an independent
computation, length buckets, errors, and reverse_plan against building the reversed plan
(issue 2)."""

import functools

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arc_jax.perturbation import (
    LENGTH_BUCKETS, PlanBuilder, bucket, custom, parse_space, reverse_plan)
from tests.helpers.reference_spaces import ALPHABET, REF_SIZES, lexicons, ref_replacements, sentences

CUSTOM = {
    "Swap": custom("Swap", 2, 2, match=lambda w: w[0] != w[1], replace=lambda w: [(w[1], w[0])]),
    "Shorten": custom("Shorten", 2, 1, match=lambda w: w[0] == "the", replace=lambda w: [(w[1],)]),
}
NAMES = ("Del", "Ins", "Sub", "Trans1", "Trans2", "Trans3", "Trans4", "Swap", "Shorten")
VOCAB = {w: i + 1 for i, w in enumerate(ALPHABET)}


def ref_fn(name, synonyms):
  """(s, t, window → set of replacements), independent of arc_jax."""
  if name == "Swap":
    return 2, 2, lambda w: {(w[1], w[0])} if w[0] != w[1] else set()
  if name == "Shorten":
    return 2, 1, lambda w: {(w[1],)} if w[0] == "the" else set()
  return (*REF_SIZES[name], lambda w: ref_replacements(name, w, synonyms))


def make_space(names, deltas, synonyms):
  spec = "[" + ",".join(f"({n},{d})" for n, d in zip(names, deltas)) + "]"
  return parse_space(spec, synonyms=synonyms, custom=CUSTOM)


def check_plan(plan, sents, rows, names, synonyms):
  """Every documented property of a forward plan, against the reference definitions."""
  n_pad = min(b for b in LENGTH_BUCKETS if b >= max([len(s) for s in sents] + [1]))
  assert plan.shape == (rows, n_pad)
  assert plan.token_ids.dtype == np.int32 and plan.lengths.dtype == np.int32
  assert plan.lengths.shape == (rows,)
  want_ids = np.zeros((rows, n_pad), np.int32)
  for b, s in enumerate(sents):
    want_ids[b, :len(s)] = [VOCAB[w] for w in s]
  np.testing.assert_array_equal(plan.token_ids, want_ids)
  np.testing.assert_array_equal(plan.lengths, [len(s) for s in sents] + [0] * (rows - len(sents)))
  assert len(plan.transformations) == len(names)
  for name, tp in zip(names, plan.transformations):
    s, t, f = ref_fn(name, synonyms)
    r = tp.replacement_ids.shape[-1]
    assert tp.match.shape == (rows, n_pad) and tp.match.dtype == np.bool_
    assert tp.replacement_ids.shape == tp.replacement_mask.shape == (rows, n_pad, t, r)
    assert tp.replacement_ids.dtype == np.int32 and tp.replacement_mask.dtype == np.bool_
    biggest = 0
    for b in range(rows):
      sent = sents[b] if b < len(sents) else ()
      for j in range(n_pad):
        window = sent[j - s + 1:j + 1] if s - 1 <= j < len(sent) else None
        repl = f(window) if window is not None else set()
        assert tp.match[b, j] == bool(repl), (name, sent, j)
        mask, ids = tp.replacement_mask[b, j], tp.replacement_ids[b, j]
        assert (ids[~mask] == 0).all()
        for l in range(t):
          places = {VOCAB[x[l]] for x in repl}
          assert sorted(ids[l][mask[l]]) == sorted(places), (name, sent, j, l)
          biggest = max(biggest, len(places))
    assert r & (r - 1) == 0 and r >= max(biggest, 1) and (r == 1 or r < 2 * biggest)


batches = st.lists(st.one_of(sentences(max_len=20), st.just(())), min_size=1, max_size=4)
spaces = st.tuples(st.lists(st.sampled_from(NAMES), min_size=1, max_size=4, unique=True),
                   st.lists(st.integers(0, 2), min_size=4, max_size=4))


@settings(max_examples=40, deadline=None)
@given(sents=batches, space=spaces, synonyms=lexicons(), extra_rows=st.integers(0, 2))
def test_plan_matches_reference(sents, space, synonyms, extra_rows):
  """Shapes, dtypes, token ids, padding, match[b, j] and per-place replacement id sets."""
  names, deltas = space
  rows = len(sents) + extra_rows
  plan = PlanBuilder(make_space(names, deltas, synonyms), VOCAB).build(sents, batch_size=rows)
  check_plan(plan, sents, rows, names, synonyms)


def test_plan_hand_example():
  """A hand-checked plan: "to the movie !" under [(Del,1),(Sub,1),(Trans2,1),(Trans4,1)]."""
  syn = {"movie": ["film", "movies", "film"], "!": ["?"]}
  space = parse_space("[(Del,1),(Sub,1),(Trans2,1),(Trans4,1)]", synonyms=syn)
  plan = PlanBuilder(space, VOCAB).build([["to", "the", "movie", "!"]], batch_size=2)
  dele, sub, trans2, trans4 = plan.transformations
  assert plan.shape == (2, 4)
  assert dele.match[0].tolist() == [True, True] + [False] * 2 and not dele.match[1].any()
  assert dele.replacement_ids.shape[2] == 0
  assert sub.match[0, :4].tolist() == [False, False, True, True]
  assert sub.replacement_ids.shape[-1] == 2
  assert set(sub.replacement_ids[0, 2, 0]) == {VOCAB["film"], VOCAB["movies"]}
  assert sub.replacement_ids[0, 3, 0].tolist() == [VOCAB["?"], 0]
  assert sub.replacement_mask[0, 3, 0].tolist() == [True, False]
  # "the movie" ends at j = 2 and becomes {the, this, a} × {movie, film} minus itself.
  assert trans2.match[0].tolist() == [False, False, True] + [False] * 1
  assert trans2.replacement_ids.shape[-1] == 4
  first = set(trans2.replacement_ids[0, 2, 0][trans2.replacement_mask[0, 2, 0]])
  second = set(trans2.replacement_ids[0, 2, 1][trans2.replacement_mask[0, 2, 1]])
  assert first == {VOCAB[w] for w in ("the", "this", "a")}
  assert second == {VOCAB[w] for w in ("movie", "film")}
  assert trans4.match[0, 3] and trans4.replacement_ids[0, 3].tolist() == [[VOCAB["!"]]] * 2


def test_length_buckets():
  """N is the smallest bucket ≥ the longest sentence (≥ 1); past the last, a multiple of it."""
  assert [bucket(n) for n in (0, 1, 8, 9, 16, 17, 50, 1024)] == [4, 4, 8, 12, 16, 20, 56, 1024]
  assert bucket(1025) == 2048 and bucket(2048) == 2048 and bucket(2049) == 3072
  assert bucket(5, (4, 6)) == 6 and bucket(7, (4, 6)) == 12
  builder = PlanBuilder(parse_space("[(Del,1)]"), VOCAB)
  assert builder.build([(), ()]).shape == (2, 4)
  assert builder.build([], batch_size=3).shape == (3, 4)
  assert builder.build([("the",) * 17, ("a",)]).shape == (2, 20)
  assert builder.build([("the",) * 1100]).shape == (1, 2048)
  custom_buckets = PlanBuilder(parse_space("[(Del,1)]"), VOCAB, length_buckets=(5, 10))
  assert custom_buckets.build([("the",) * 6]).shape == (1, 10)
  assert custom_buckets.build([("the",) * 11]).shape == (1, 20)


def test_batch_too_small():
  """More sentences than batch_size is an error."""
  with pytest.raises(ValueError, match="batch"):
    PlanBuilder(parse_space("[(Del,1)]"), VOCAB).build([("a",), ("the",)], batch_size=1)


def test_unknown_vocabulary():
  """Unknown tokens and unknown replacement words name the word and the fix; restricting works."""
  syn = {"good": ["fine", "great"]}
  space = parse_space("[(Sub,1)]", synonyms=syn)
  vocab = {"good": 1, "movie": 2, "great": 3}
  with pytest.raises(KeyError, match="'awful'.*restricted_to"):
    PlanBuilder(space, vocab).build([("good", "awful")])
  with pytest.raises(KeyError, match="'fine'.*restricted_to"):
    PlanBuilder(space, vocab).build([("good", "movie")])
  plan = PlanBuilder(space.restricted_to(vocab), vocab).build([("good", "movie")])
  ids, mask = plan.transformations[0].replacement_ids, plan.transformations[0].replacement_mask
  assert ids[0, 0, 0][mask[0, 0, 0]].tolist() == [3] and not plan.transformations[0].match[0, 1]


def assert_plans_equal(got, want):
  assert got.shape == want.shape
  for a, b in [(got.token_ids, want.token_ids), (got.lengths, want.lengths)] + [
      (x, y) for g, w in zip(got.transformations, want.transformations)
      for x, y in [(g.match, w.match), (g.replacement_ids, w.replacement_ids),
                   (g.replacement_mask, w.replacement_mask)]]:
    a = np.asarray(a)
    assert a.shape == b.shape and a.dtype == b.dtype
    np.testing.assert_array_equal(a, b)


@settings(max_examples=40, deadline=None)
@given(sents=st.lists(st.one_of(sentences(max_len=16), st.just(())), min_size=1, max_size=4),
       space=spaces, synonyms=lexicons())
def test_reverse_plan_equals_reversed_build(sents, space, synonyms):
  """reverse_plan(plan, S) == PlanBuilder(S^R).build(reversed sentences), array for array.

  Batches of 4 rows (padding rows included) and N ≤ 16 keep the number of distinct array shapes,
  hence of eager-op compilations, small.
  """
  names, deltas = space
  rows = 4
  sp = make_space(names, deltas, synonyms)
  plan = PlanBuilder(sp, VOCAB).build(sents, batch_size=rows)
  want = PlanBuilder(sp.reversed(), VOCAB).build([s[::-1] for s in sents], batch_size=rows)
  assert_plans_equal(reverse_plan(plan, sp), want)


def test_reverse_plan_under_jit():
  """reverse_plan traces under jit and gives the same arrays."""
  sp = parse_space("[(Trans3,1),(Del,2),(Sub,1),(Trans4,1)]", synonyms={"best": ["finest"]})
  sents = [tuple("one of the best films !".split()), (), ("a", "film", "to", "?")]
  plan = PlanBuilder(sp, VOCAB | {"finest": len(VOCAB) + 1}).build(sents, batch_size=4)
  want = PlanBuilder(sp.reversed(), VOCAB | {"finest": len(VOCAB) + 1}).build(
      [s[::-1] for s in sents], batch_size=4)
  assert_plans_equal(jax.jit(functools.partial(reverse_plan, space=sp))(plan), want)
