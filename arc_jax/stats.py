"""Uncertainty of the reported rates: Wilson intervals and McNemar's paired test.

A rate in the tables (Acc, CF, EX, HF, exact) is a count of n test examples; its 95% interval
is Wilson's score interval, which stays inside [0, 1] and is sound for counts near 0 or n, where
the normal approximation is not. Two models evaluated on the same examples (ARC against a
baseline, same space and split) are compared per example: McNemar's exact test looks only at the
discordant examples (robust under one and not the other), whose split is Binomial(b + c, 1/2)
when the two rates are equal.

Pure Python (no JAX, no SciPy): the report imports it without starting JAX.
"""

from __future__ import annotations

import math
from typing import Sequence

Z_95 = 1.959963984540054
"""The standard normal's 97.5% quantile: the z of a two-sided 95% interval."""


def wilson_interval(count: int, total: int, z: float = Z_95) -> tuple[float, float]:
  """Wilson's score interval (lo, hi) of the rate ``count / total``; (0, 1) when ``total`` is 0.

  Raises:
    ValueError: ``count`` outside [0, total].
  """
  if not 0 <= count <= total:
    raise ValueError(f"count={count} is outside [0, total={total}].")
  if total == 0:
    return 0.0, 1.0
  p = count / total
  z2 = z * z
  centre = (p + z2 / (2 * total)) / (1 + z2 / total)
  half = z * math.sqrt(p * (1 - p) / total + z2 / (4 * total * total)) / (1 + z2 / total)
  # At count 0 (n) the lower (upper) end is 0 (1) exactly; rounding would leave a speck.
  return (0.0 if count == 0 else centre - half), (1.0 if count == total else centre + half)


def mcnemar(first: Sequence[bool], second: Sequence[bool]) -> dict:
  """McNemar's exact two-sided test of two paired per-example outcomes (e.g. ``cf`` of two
  models on the same split).

  Returns:
    ``{"only_first": b, "only_second": c, "p_value": p}``: the discordant counts and the
    two-sided exact binomial p-value, min(1, 2·P[X ≤ min(b, c)]) for X ~ Binomial(b + c, 1/2)
    (1.0 when no example is discordant).

  Raises:
    ValueError: the two sequences differ in length.
  """
  if len(first) != len(second):
    raise ValueError(f"paired outcomes of different lengths: {len(first)} and {len(second)}; "
                     "compare evaluations of the same split and examples.")
  b = sum(1 for x, y in zip(first, second) if x and not y)
  c = sum(1 for x, y in zip(first, second) if y and not x)
  n, k = b + c, min(b, c)
  tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n if n else 1.0
  return {"only_first": b, "only_second": c, "p_value": min(1.0, 2 * tail)}


def mean_sd(values: Sequence[float]) -> tuple[float, float]:
  """The mean and the sample standard deviation (n − 1 in the denominator) of ``values``: the
  spread of a rate over training seeds.

  Raises:
    ValueError: fewer than two values (one run has no spread to estimate).
  """
  if len(values) < 2:
    raise ValueError(f"mean ± sd needs at least two values, got {len(values)}.")
  mean = sum(values) / len(values)
  return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def format_p(p: float) -> str:
  """A p-value in three significant digits (``0.0123``, ``4.56e-07``); ``< 1e-300`` for one
  that underflows to 0."""
  return "< 1e-300" if p == 0 else f"{p:.3g}"
