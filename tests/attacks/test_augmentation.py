"""Random members of S(x): membership, uniformity over application choices, determinism.

Expected frequencies come from a brute-force enumeration of application choices written here
from the definition (sets of non-overlapping picks within the budgets), not from arc_jax.
"""

import collections
import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from arc_jax.attacks import augment_batch, sample_member
from arc_jax.attacks.augmentation import _uniform_below
from arc_jax.perturbation import parse_space
from tests.helpers.reference_spaces import REF_SIZES, lexicons, ref_replacements, sentences

KINDS = ["Del", "Ins", "Sub", "Trans1", "Trans2", "Trans3", "Trans4"]


def brute_force_choices(tokens, names, budgets, synonyms):
  """The string of every application choice: every set of picks (start, T, replacement) with
  pairwise disjoint windows and at most δ_k picks of each T_k, applied to ``tokens``."""
  picks = [(i, k, r) for k, name in enumerate(names) for i in range(len(tokens))
           for r in sorted(ref_replacements(name, tokens[i:i + REF_SIZES[name][0]], synonyms))
           if i + REF_SIZES[name][0] <= len(tokens)]
  strings = []
  for size in range(sum(budgets) + 1):
    for choice in itertools.combinations(picks, size):
      spans = sorted((i, i + REF_SIZES[names[k]][0], r) for i, k, r in choice)
      if any(a[1] > b[0] for a, b in zip(spans, spans[1:])):
        continue
      if any(sum(k == j for _, k, _ in choice) > budgets[j] for j in range(len(names))):
        continue
      out, pos = [], 0
      for start, end, r in spans:
        out += list(tokens[pos:start]) + list(r)
        pos = end
      strings.append(tuple(out + list(tokens[pos:])))
  return strings


@settings(max_examples=60, deadline=None)
@given(x=sentences(max_len=6), lexicon=lexicons(),
       kinds=st.lists(st.sampled_from(KINDS), min_size=1, max_size=3, unique=True),
       budgets=st.lists(st.integers(0, 2), min_size=3, max_size=3),
       seed=st.integers(0, 2**32 - 1))
def test_samples_are_members(x, lexicon, kinds, budgets, seed):
  spec = "[" + ",".join(f"({k},{d})" for k, d in zip(kinds, budgets)) + "]"
  space = parse_space(spec, synonyms=lexicon)
  members = set(space.enumerate(x))
  samples = augment_batch(space, [x], np.random.default_rng(seed), n_per_sentence=5)
  assert set(samples) <= members
  assert sample_member(space, x, np.random.default_rng(seed)) in members


def test_uniform_over_application_choices():
  synonyms = {"good": ["fine", "great"], "a": ["the"]}
  names, budgets = ["Del", "Ins", "Sub"], [1, 1, 1]
  x = ("a", "a", "good")
  space = parse_space("[(Del,1),(Ins,1),(Sub,1)]", synonyms=synonyms)
  choices = collections.Counter(brute_force_choices(x, names, budgets, synonyms))
  total = sum(choices.values())
  assert total == space.count(x)
  # Several choices give the same string, so uniform-over-strings would fail this test.
  assert max(choices.values()) > 1 and min(choices.values()) == 1

  draws = 4000
  samples = collections.Counter(augment_batch(space, [x], np.random.default_rng(0), draws))

  assert set(samples) <= set(choices)
  for string, ways in choices.items():
    p = ways / total
    sigma = math.sqrt(draws * p * (1 - p))
    assert abs(samples[string] - draws * p) <= 5 * sigma, (string, samples[string], draws * p)


def test_uniform_beyond_64_bits():
  # 200 distinct words with one synonym each and 20 substitutions: Σ_{j≤20} C(200, j) > 2^90
  # choices. P(exactly j substitutions) = C(200, j) / Σ, checked at j = 20 and j = 19.
  x = tuple(f"w{i}" for i in range(200))
  space = parse_space("[(Sub,20)]", synonyms={w: [w.upper()] for w in x})
  total = sum(math.comb(200, j) for j in range(21))
  assert total > 2**90

  draws = 2000
  samples = augment_batch(space, [x], np.random.default_rng(1), n_per_sentence=draws)

  subs = collections.Counter(sum(a != b for a, b in zip(s, x)) for s in samples)
  assert all(len(s) == 200 and all(a in (b, b.upper()) for a, b in zip(s, x)) for s in samples)
  for j in (20, 19):
    p = math.comb(200, j) / total
    assert abs(subs[j] - draws * p) <= 5 * math.sqrt(draws * p * (1 - p)), (j, subs[j])


def test_uniform_below_is_uniform_and_in_range():
  rng = np.random.default_rng(2)
  for bound in (1, 2, 3, 2**32, 2**32 + 1, 2**64 + 3, 3**50):
    values = [_uniform_below(rng, bound) for _ in range(50)]
    assert all(0 <= v < bound for v in values)
  draws = 3000
  counts = collections.Counter(_uniform_below(rng, 3) for _ in range(draws))
  sigma = math.sqrt(draws * (1 / 3) * (2 / 3))
  assert all(abs(counts[v] - draws / 3) <= 5 * sigma for v in range(3))


def test_deterministic_given_the_generator():
  space = parse_space("[(Ins,2),(Sub,2)]", synonyms={"good": ["fine", "great"]})
  batch = [("a", "good", "movie"), ("good",), ()]
  first = augment_batch(space, batch, np.random.default_rng(5), n_per_sentence=20)
  again = augment_batch(space, batch, np.random.default_rng(5), n_per_sentence=20)
  other = augment_batch(space, batch, np.random.default_rng(6), n_per_sentence=20)
  assert first == again and first != other
  assert sample_member(space, batch[0], np.random.default_rng(5)) == first[0]


def test_augment_batch_layout():
  space = parse_space("[(Del,1)]")
  samples = augment_batch(space, [("the",), ("movie",), ()], np.random.default_rng(0), 4)
  assert len(samples) == 12
  assert set(samples[:4]) <= {("the",), ()}
  assert samples[4:8] == [("movie",)] * 4 and samples[8:] == [()] * 4
  with pytest.raises(ValueError, match="n_per_sentence"):
    augment_batch(space, [("the",)], np.random.default_rng(0), 0)
