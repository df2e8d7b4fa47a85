"""Wilson intervals and McNemar's test against SciPy's and brute force."""

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as scipy_stats

from arc_jax.stats import mcnemar, wilson_interval


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_wilson_matches_scipy(case):
  count, total = case
  if total == 0:
    assert wilson_interval(count, total) == (0.0, 1.0)
    return
  expected = scipy_stats.binomtest(count, total).proportion_ci(0.95, method="wilson")
  lo, hi = wilson_interval(count, total)
  assert lo == pytest.approx(expected.low, abs=1e-12) and hi == pytest.approx(expected.high,
                                                                              abs=1e-12)
  assert 0.0 <= lo <= count / total <= hi <= 1.0


def test_wilson_at_the_tables_sizes():
  """About ±2 points at n = 1,821 and ±9 at n = 100 near the middle, as the issue states."""
  lo, hi = wilson_interval(1360, 1821)
  assert 0.015 < (hi - lo) / 2 < 0.025
  lo, hi = wilson_interval(50, 100)
  assert 0.09 < (hi - lo) / 2 < 0.1
  with pytest.raises(ValueError, match="outside"):
    wilson_interval(5, 4)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.booleans()), max_size=60))
def test_mcnemar_matches_the_exact_binomial_test(pairs):
  first, second = [p[0] for p in pairs], [p[1] for p in pairs]
  out = mcnemar(first, second)
  b, c = out["only_first"], out["only_second"]
  assert b == sum(x and not y for x, y in pairs) and c == sum(y and not x for x, y in pairs)
  expected = 1.0 if b + c == 0 else scipy_stats.binomtest(b, b + c, 0.5).pvalue
  assert out["p_value"] == pytest.approx(expected, rel=1e-9, abs=1e-15)


def test_mcnemar_by_enumeration_and_its_errors():
  # Two-sided tail by brute force over every split of 9 discordant examples.
  splits = [sum(s) for s in itertools.product((0, 1), repeat=9)]
  tail = sum(1 for k in splits if k <= 2) / len(splits)
  assert mcnemar([True] * 7 + [False] * 2, [False] * 7 + [True] * 2)["p_value"] == \
      pytest.approx(2 * tail)
  assert mcnemar([True, False], [True, False]) == {"only_first": 0, "only_second": 0,
                                                   "p_value": 1.0}
  with pytest.raises(ValueError, match="same split"):
    mcnemar([True], [True, False])
  assert math.isclose(mcnemar([True] * 3, [False] * 3)["p_value"], 0.25)
