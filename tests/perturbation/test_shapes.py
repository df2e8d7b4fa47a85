"""Shape menus (issue 16: a bounded number of compiled shapes): the greedy fit's bound and cover,
plans padded and cut to their entry, and S_review's real epoch within the default bound."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arc_jax.configs import sst2_row_config
from arc_jax.perturbation import (PlanBuilder, ShapeMenu, fit_shape_menu, parse_space,
                                  reachable_signature)
from arc_jax.perturbation.shapes import MAX_DP_SHAPES, work
from arc_jax.train.experiment import build_experiment
from tests.helpers.real_data import requires_data
from tests.helpers.reference_spaces import ALPHABET, lexicons, sentences


VOCAB = {w: i + 1 for i, w in enumerate(ALPHABET)}
REVIEW = "[(Trans1,1),(Trans2,1),(Trans3,1),(Trans4,1),(Sub,2)]"

exact_shapes = st.dictionaries(
    st.tuples(st.sampled_from((4, 8, 12, 16, 24, 56)),
              st.tuples(st.integers(0, 1), st.integers(0, 2), st.integers(0, 2))),
    st.integers(1, 500), min_size=1, max_size=30)


def total_work(menu, counts):
  return sum(c * work(menu.fit(*shape)) for shape, c in counts.items())


@settings(max_examples=60, deadline=None)
@given(counts=exact_shapes, max_shapes=st.integers(1, 12))
def test_menu_bounds_and_covers(counts, max_shapes):
  """At most max_shapes entries; every row fits an entry at least as wide and as large as its
  exact shape; a larger bound never costs more work; with no bound that matters, each row runs
  on its own work."""
  menu = fit_shape_menu(counts, max_shapes)
  assert 1 <= len(menu) <= max_shapes and len(set(menu.entries)) == len(menu)
  for (width, budgets) in counts:
    entry = menu.fit(width, budgets)
    assert entry in menu.entries
    assert entry[0] >= width and all(d >= b for d, b in zip(entry[1], budgets))
  larger = fit_shape_menu(counts, max_shapes + 1)
  assert total_work(larger, counts) <= total_work(menu, counts)
  roomy = fit_shape_menu(counts, 10_000)
  assert all(work(roomy.fit(*shape)) == work(shape) for shape in counts)


def test_no_bound_and_wider_rows():
  """A bound of 0 (or no rows) is no menu; a row wider than every entry keeps its width and runs
  on the cover's grid raised to its budgets."""
  assert fit_shape_menu({(8, (1, 2)): 3}, 0) is None and fit_shape_menu({}, 4) is None
  assert fit_shape_menu({(4, ()): 2, (12, ()): 1}, 3).entries == ((12, ()), (4, ()))  # space []
  menu = ShapeMenu(((16, (1, 1)), (8, (0, 1))))
  assert menu.fit(4, (0, 0)) == (8, (0, 1))
  assert menu.fit(4, (1, 0)) == (16, (1, 1))
  assert menu.fit(24, (0, 2)) == (24, (1, 2))
  # Fits are memoised; the memo is no part of the menu's value.
  assert menu.fit(4, (1, 0)) == (16, (1, 1)) and menu.fit(24, (0, 2)) == (24, (1, 2))
  assert menu == ShapeMenu(menu.entries) and hash(menu) == hash(ShapeMenu(menu.entries))


@settings(max_examples=50, deadline=None)
@given(sents=st.lists(sentences(max_len=12), min_size=1, max_size=6), synonyms=lexicons(),
       budgets=st.lists(st.integers(1, 3), min_size=5, max_size=5))
def test_reachable_budgets_count_the_rewritable_windows(sents, synonyms, budgets):
  """Per transformation, min(δ_k, number of windows T_k rewrites), from the space's own windows;
  asked again, the memoised shape is the same."""
  names = ("Trans1", "Trans2", "Trans3", "Trans4", "Sub")
  space = parse_space("[" + ",".join(f"({k},{d})" for k, d in zip(names, budgets)) + "]",
                      synonyms=synonyms)
  builder = PlanBuilder(space, VOCAB)
  for sent in sents:
    windows = space.windows(sent)
    expected = tuple(min(d, sum(bool(w[k]) for w in windows)) for k, d in enumerate(budgets))
    assert builder.reachable_budgets(sent) == expected
    assert builder.exact_shape(sent)[1] == expected == builder.exact_shape(list(sent))[1]


@settings(max_examples=25, deadline=None)
@given(sents=st.lists(sentences(max_len=20), min_size=2, max_size=12), synonyms=lexicons(),
       max_shapes=st.integers(1, 3))
def test_builder_plans_on_their_entry(sents, synonyms, max_shapes):
  """Grouped rows carry their entry (grid_group); a plan of rows is padded to the entry of the
  rows' largest bucket and budgets, and reachable_signature with the menu gives its grid, which
  contains the plan's exact reachable grid."""
  space = parse_space(REVIEW, synonyms=synonyms)
  builder = PlanBuilder(space, VOCAB)
  menu = builder.bound_shapes(sents, max_shapes)
  assert len(menu) <= max_shapes
  assert {tuple(builder.grid_group(s)) for s in sents} <= {(w, *g) for w, g in menu.entries}
  for rows in (sents[:1], sents[1:4], sents):
    plan = builder.build(rows, batch_size=len(sents))
    exact = reachable_signature(space, plan).budgets
    width, grid = menu.fit(plan.shape[1], exact)
    assert plan.shape[1] == width and (width, grid) in menu.entries
    assert reachable_signature(space, plan, menu).budgets == grid
    assert all(g >= e for g, e in zip(grid, exact))
    assert builder.shape_menu is menu


@requires_data
def test_review_epoch_within_the_bound():
  """SST-2 under S_review (ARC LSTM, Table 3): every certified batch of a training epoch, dev and
  test runs on one of at most MAX_DP_SHAPES shapes (each one compilation of the training step or
  of certification); the exact grids give 105 training shapes, which overflow Linux's default
  map limit (arc_jax.perturbation.shapes)."""
  config = sst2_row_config("arc", "lstm,review")
  exp = build_experiment(config)
  menu = exp.builder.shape_menu
  assert config.max_dp_shapes == MAX_DP_SHAPES and len(menu) <= MAX_DP_SHAPES
  entries = {(w, *g) for w, g in menu.entries}
  for split in ("train", "validation", "test"):
    examples, _ = exp.examples(split)
    assert {tuple(exp.builder.grid_group(x)) for x in examples} <= entries
  # The batches themselves, on the first pool of the training order.
  for batch in itertools.islice(exp.batches("train", 32, certify=True, shuffle=True), 100):
    assert (batch.token_ids.shape[1], *batch.plan.reachable) in entries
    assert np.all(batch.lengths <= batch.token_ids.shape[1])
