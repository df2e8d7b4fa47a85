"""A bounded set of DP shapes: the (padded width, reachable grid) pairs certified batches run on.

Every jitted DP step (the ARC training step, certification) compiles once per padded width and
reachable grid (:func:`arc_jax.perturbation.reachable_signature`). Exact grids give up to
Π_k (δ_k + 1) grids per length bucket: 108 training shapes in one SST-2 epoch of
S_review's five transformations, 27 for ``[(Del,2),(Sub,2)]``. Each compiled program holds
about 1,300 memory maps of XLA's CPU code (a few per kernel), so an S_review epoch needs more
than Linux's default ``vm.max_map_count`` of 65,530 and the process dies. A :class:`ShapeMenu`
caps the shapes: a batch runs on the cheapest entry at least as wide as its length bucket and at
least as large as its reachable budgets, which gives the same certificates (a larger grid only
adds slots that stay ⊥, extra padding positions are masked), at the cost of the extra work.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence

import numpy as np

MAX_DP_SHAPES = 16
"""The default bound (``config.max_dp_shapes``, :func:`arc_jax.certify`): an S_review epoch of
ARC training (15 shapes) and its dev certification (10) then stay under Linux's default map
limit, for a modest rise in DP work over the exact grids (benchmarks/README.md has the ratios)."""

Shape = tuple[int, tuple[int, ...]]
"""(padded width N, budgets δ'_k of the DP grid)."""


def work(shape: Shape) -> int:
  """The DP work of a batch of that shape, up to a factor: N · Π_k (δ'_k + 1) cell slots."""
  width, budgets = shape
  return width * int(np.prod([d + 1 for d in budgets]))


@dataclasses.dataclass(frozen=True)
class ShapeMenu:
  """The shapes batches may use; the first entry covers every row it was fitted on.

  Attributes:
    entries: the allowed (width, budgets) pairs, no two alike.
  """

  entries: tuple[Shape, ...]
  # Every row is fitted once per epoch (PlanBuilder.grid_group) and a menu sees few distinct
  # (width, budgets): memoised, the 67,349 rows of an SST-2 epoch take a dict look-up each.
  _fitted: dict = dataclasses.field(default_factory=dict, init=False, repr=False, compare=False)

  def __len__(self) -> int:
    return len(self.entries)

  def fit(self, width: int, budgets: Sequence[int]) -> Shape:
    """The least-work entry with width ≥ ``width`` and every budget ≥ ``budgets`` (ties: the
    narrower, then the lexicographically smaller). A row wider than every entry keeps its width
    and runs on the covering entry's grid raised to its budgets (one shape per such width)."""
    key = (width, tuple(budgets))  # NumPy integers hash and compare as Python ints
    if key not in self._fitted:
      width, budgets = int(width), tuple(int(b) for b in budgets)
      fitting = [e for e in self.entries
                 if e[0] >= width and all(d >= b for d, b in zip(e[1], budgets))]
      self._fitted[key] = (
          min(fitting, key=lambda e: (work(e), e)) if fitting
          else (width, tuple(max(d, b) for d, b in zip(self.entries[0][1], budgets))))
    return self._fitted[key]


def fit_shape_menu(counts: Mapping[Shape, int], max_shapes: int) -> ShapeMenu | None:
  """At most ``max_shapes`` shapes for rows of the given exact shapes, chosen to keep the work low.

  Greedy: the menu starts with the cover (the widest row width, the largest budget of every
  transformation), which every row fits; then it adds, one at a time, the candidate that lowers
  Σ_rows work(entry the row fits) the most, until it has ``max_shapes`` entries or no candidate
  lowers it (then every row runs on its exact shape). Candidates: every row width with every
  row's budgets. The work it adds over the exact shapes is in benchmarks/README.md (batches,
  which run on the largest of their rows, lose less than rows).

  Args:
    counts: exact shape (length bucket, reachable budgets) → number of rows.
    max_shapes: the bound; 0 or less: no menu (None), every batch on its exact shape.

  Returns:
    The menu, or None when ``max_shapes`` ≤ 0 or there are no rows.
  """
  if max_shapes <= 0 or not counts:
    return None
  keys = list(counts)
  axes = len(keys[0][1])
  widths = np.array([w for w, _ in keys])
  budgets = np.array([b for _, b in keys], np.int64).reshape(len(keys), axes)
  rows = np.array([counts[k] for k in keys], np.float64)
  cover = (int(widths.max()), tuple(int(d) for d in budgets.max(axis=0)))
  grids = sorted({tuple(int(d) for d in b) for b in budgets} | {cover[1]})
  candidates = [(int(w), g) for w in sorted(set(widths.tolist())) for g in grids]
  cost = np.array([work(c) for c in candidates], np.float64)
  cand_w = np.array([w for w, _ in candidates])
  cand_b = np.array([g for _, g in candidates], np.int64).reshape(len(candidates), axes)
  fits = (cand_w[:, None] >= widths[None, :]) & (cand_b[:, None, :] >= budgets[None]).all(-1)
  entries = [cover]
  current = np.full(len(keys), float(work(cover)))
  while len(entries) < max_shapes:
    gain = (np.clip(current[None, :] - cost[:, None], 0, None) * fits * rows).sum(axis=1)
    best = int(gain.argmax())
    if gain[best] <= 0:
      break
    entries.append(candidates[best])
    current = np.where(fits[best], np.minimum(current, cost[best]), current)
  return ShapeMenu(tuple(entries))
