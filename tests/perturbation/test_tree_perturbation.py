"""Tree perturbation spaces: the paper's rewrites, exact enumeration, counting, schedules, batches.

The enumeration follows the definition (application choices at leaves, then contraction); here it
is checked on the paper's figures, against a brute-force product of leaf choices, and against an
independent set-level run of the paper's transition equations (appendix "Handling Tree-LSTMs").
"""

import collections
import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import arc_jax
from arc_jax.attacks import sample_tree_member
from arc_jax.data import parse_tree
from arc_jax.data.tree_batching import hu_schedule
from arc_jax.data.trees import from_nested, to_nested
from arc_jax.perturbation import parse_space
from arc_jax.perturbation.trees import TreeBatchBuilder, rewrite_leaves, tree_space
from tests.helpers.reference_spaces import ref_replacements
from tests.helpers.trees import WORDS, nested_trees

STOP = ("a", "the", "to")
VOCAB = {w: i for i, w in enumerate(("<pad>",) + WORDS)}


def space_of(spec, synonyms=None, stopwords=STOP):
  return tree_space(parse_space(spec, synonyms=synonyms or {}, stopwords=stopwords))


def tree_of(nested, root_label=1):
  return from_nested(nested, root_label)


@st.composite
def tree_spaces(draw):
  """Random specs over Del, Ins, Sub (δ ≤ 2), lexicons and stop-word sets."""
  kinds = draw(st.lists(st.sampled_from(["Del", "Ins", "Sub"]), min_size=1, max_size=3,
                        unique=True))
  spec = "[" + ",".join(f"({k},{draw(st.integers(0, 2))})" for k in kinds) + "]"
  synonyms = draw(st.dictionaries(st.sampled_from(WORDS), st.lists(st.sampled_from(WORDS),
                                                                   max_size=3), max_size=6))
  stop = draw(st.lists(st.sampled_from(WORDS), max_size=4))
  return spec, synonyms, stop


def set_level_dp(nested, spec, synonyms, stop):
  """The paper's transition equations on sets of trees (independent of arc_jax's enumerator).

  H[u][c]: the trees of subtree u under exactly c rewrites, c = (#Del, #Dup, #Sub).
  """
  budgets = dict.fromkeys(("Del", "Ins", "Sub"), 0)
  for name, delta in (item.strip("()").split(",") for item in spec.strip("[]").split("),(")):
    budgets[name] = int(delta)
  delta = (budgets["Del"], budgets["Ins"], budgets["Sub"])
  fits = lambda c: all(a <= d for a, d in zip(c, delta))
  plus = lambda a, b: tuple(x + y for x, y in zip(a, b))

  def visit(node):
    """(H, deletable size or None)."""
    if isinstance(node, str):
      h = {(0, 0, 0): {node}}
      if delta[1]:
        h[(0, 1, 0)] = {(node, node)}
      subs = {r[0] for r in ref_replacements("Sub", (node,), synonyms)}
      if delta[2] and subs:
        h[(0, 0, 1)] = subs
      return h, (1 if node in stop and delta[0] else None)
    (hl, dl), (hr, dr) = visit(node[0]), visit(node[1])
    h = {}
    for (c1, s1), (c2, s2) in itertools.product(hl.items(), hr.items()):
      if fits(plus(c1, c2)):
        h.setdefault(plus(c1, c2), set()).update(itertools.product(s1, s2))
    for d, other in ((dl, hr), (dr, hl)):
      for c, trees in other.items():
        if d is not None and fits(plus(c, (d, 0, 0))):
          h.setdefault(plus(c, (d, 0, 0)), set()).update(trees)
    return h, (dl + dr if dl and dr else None)

  h, _ = visit(nested)
  return set().union(*h.values())


def brute_force_choices(nested, space):
  """Number of application choices: the product of per-leaf options, filtered by the budgets."""
  tree = tree_of(nested)
  options = [[None] + space.leaf_rewrites(w) for w in tree.tokens]
  count = 0
  for choice in itertools.product(*options):
    used = [0] * len(space.kinds)
    for option in choice:
      if option is not None:
        used[option[0]] += 1
    everything_deleted = all(o is not None and o[1] is None for o in choice)
    count += all(u <= d for u, d in zip(used, space.budgets)) and not everything_deleted
  return count


# --- the paper's figures and the corner cases of the definition ---------------------------------


def test_del_removes_a_stop_word_and_its_sibling_takes_the_parent_place():
  space = space_of("[(Del,1)]")
  tree = tree_of(("x", ("the", "movie")))
  assert set(space.enumerate(tree)) == {("x", ("the", "movie")), ("x", "movie")}


def test_dup_makes_an_internal_node_with_two_copies():
  space = space_of("[(Ins,1)]")
  assert set(space.enumerate(tree_of(("to", "x")))) == {
      ("to", "x"), (("to", "to"), "x"), ("to", ("x", "x"))}


def test_sub_replaces_a_leaf_word_by_a_synonym():
  space = space_of("[(Sub,1)]", {"movie": ["film", "movie"]})
  assert set(space.enumerate(tree_of(("x", "movie")))) == {("x", "movie"), ("x", "film")}


def test_a_subtree_of_stop_words_is_deletable_within_the_budget():
  tree = tree_of((("the", "a"), "movie"))
  assert ("movie" in set(space_of("[(Del,2)]").enumerate(tree)))
  assert set(space_of("[(Del,1)]").enumerate(tree)) == {
      (("the", "a"), "movie"), ("a", "movie"), ("the", "movie")}


def test_deleting_every_leaf_leaves_no_tree():
  space = space_of("[(Del,2)]")
  assert set(space.enumerate(tree_of(("the", "a")))) == {("the", "a"), "a", "the"}
  assert list(space.enumerate(tree_of("the"))) == ["the"]
  assert space.count(tree_of(("the", "a"))) == 3


def test_one_rewrite_per_leaf_of_the_original_tree():
  space = space_of("[(Ins,2),(Sub,2)]", {"good": ["fine"]})
  assert set(space.enumerate(tree_of("good"))) == {"good", ("good", "good"), "fine"}


def test_unperturbed_tree_comes_first_and_nested_round_trips():
  nested = (("the", "good"), ("movie", "x"))
  tree = tree_of(nested, root_label=3)
  assert to_nested(tree) == nested
  assert tree.label == 3 and tree.labels[:-1] == (-1,) * 6
  assert next(space_of("[(Del,2),(Ins,1)]").enumerate(tree)) == nested


@pytest.mark.parametrize("spec", ["[(Trans1,1)]", "[(Sub,1),(Trans3,1)]", "[(Swap,1)]"])
def test_string_only_transformations_are_rejected(spec):
  swap = arc_jax.custom("Swap", 2, 2, match=lambda w: True, replace=lambda w: [w[::-1]])
  with pytest.raises(ValueError, match="no tree counterpart"):
    tree_space(parse_space(spec, synonyms={}, custom={"Swap": swap}))


def test_trans4_is_a_duplication_of_the_leaves_it_matches():
  space = tree_space(parse_space("[(Trans4,1)]"))
  assert space.kinds == ("Dup",)
  assert set(space.enumerate(from_nested(("good", "!")))) == {("good", "!"),
                                                              ("good", ("!", "!"))}


def test_ins_and_dup_together_are_rejected():
  with pytest.raises(ValueError, match="two transformations with the tree rewrite T_Dup, Ins and "
                                       "Dup"):
    space_of("[(Ins,1),(Dup,1)]")


# --- properties -------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(nested=nested_trees(), space=tree_spaces())
def test_enumeration_equals_the_paper_transition_equations(nested, space):
  spec, synonyms, stop = space
  tspace = space_of(spec, synonyms, stop)
  members = list(tspace.enumerate(tree_of(nested)))
  assert len(members) == len(set(members))
  assert set(members) == set_level_dp(nested, spec, synonyms, stop)


@settings(max_examples=100, deadline=None)
@given(nested=nested_trees(), space=tree_spaces())
def test_count_is_the_number_of_application_choices(nested, space):
  spec, synonyms, stop = space
  tspace = space_of(spec, synonyms, stop)
  tree = tree_of(nested)
  count = tspace.count(tree)
  assert count == brute_force_choices(nested, tspace)
  assert len(list(tspace.enumerate(tree))) <= count


@settings(max_examples=60, deadline=None)
@given(nested=nested_trees(), space=tree_spaces())
def test_added_nodes_is_the_most_a_tree_of_the_space_grows(nested, space):
  tspace = space_of(*space)
  tree = tree_of(nested)
  largest = max(from_nested(member).num_nodes for member in tspace.enumerate(tree))
  assert largest <= tree.num_nodes + tspace.signature.added_nodes
  if len(tree.tokens) >= max(tspace.budgets):  # leaves enough to spend the Ins budget
    assert largest == tree.num_nodes + tspace.signature.added_nodes


# --- labelled rewrites and random members (data augmentation) ----------------------------------


def test_rewritten_trees_carry_each_node_label_to_what_the_node_became():
  tree = parse_tree("(4 (2 the) (3 (3 good) (1 movie)))")
  # Deleting "the" contracts the root onto its right child, which takes the root's label.
  kept = rewrite_leaves(tree, [None, "fine", "movie"])
  assert (to_nested(kept), kept.labels) == (("fine", "movie"), (3, 1, 4))
  # A duplicated leaf becomes an internal node; it and its two copies keep the leaf's label.
  dup = rewrite_leaves(tree, ["the", "good", ("movie", "movie")])
  assert to_nested(dup) == ("the", ("good", ("movie", "movie")))
  assert dup.labels == (2, 3, 1, 1, 1, 3, 4)
  assert rewrite_leaves(parse_tree("(1 (2 the) (2 a))"), [None, None]) is None


def choice_distribution(nested, space):
  """Tree → number of application choices giving it, by the definition (independent code)."""
  tree = tree_of(nested)
  options = [[None] + space.leaf_rewrites(w) for w in tree.tokens]

  def apply(node, results):
    if isinstance(node, str):
      return next(results)
    left, right = apply(node[0], results), apply(node[1], results)
    return right if left is None else left if right is None else (left, right)

  counts = collections.Counter()
  for choice in itertools.product(*options):
    used = collections.Counter(o[0] for o in choice if o is not None)
    if any(used[k] > d for k, d in enumerate(space.budgets)):
      continue
    leaves = iter(w if o is None else o[1] for w, o in zip(tree.tokens, choice))
    member = apply(nested, leaves)
    if member is not None:
      counts[member] += 1
  return counts


@pytest.mark.parametrize("text, spec", [
    # Deleting either "the" gives the same tree: uniform over choices, not over trees.
    ("(3 (2 (2 the) (2 the)) (4 good))", "[(Del,2),(Ins,1),(Sub,1)]"),
    # Deleting both leaves leaves no tree: that choice is redrawn.
    ("(1 (2 the) (2 a))", "[(Del,2),(Ins,1)]")])
def test_tree_samples_are_uniform_over_application_choices_with_labels(text, spec):
  space = space_of(spec, {"good": ["fine"]})
  tree = parse_tree(text)
  expected = choice_distribution(to_nested(tree), space)
  total = sum(expected.values())
  assert total == space.count(tree)

  draws = 3000
  rng = np.random.default_rng(0)
  samples = [sample_tree_member(space, tree, rng) for _ in range(draws)]
  counts = collections.Counter(to_nested(t) for t in samples)
  assert set(counts) <= set(expected)
  for member, ways in expected.items():
    p = ways / total
    assert abs(counts[member] - draws * p) <= 5 * math.sqrt(draws * p * (1 - p)), member
  assert all(t.label == tree.label and min(t.labels) >= 0 for t in samples)
  first = sample_tree_member(space, tree, np.random.default_rng(5))
  assert all(sample_tree_member(space, tree, np.random.default_rng(5)) == first for _ in range(3))


# --- schedules and batches --------------------------------------------------------------------


def check_schedule(trees, steps, width):
  batch = TreeBatchBuilder(VOCAB).build(trees, max_nodes=16, width=width)
  n_pad = batch.shape[1]
  done = set()
  for step in steps:
    assert len(step) <= width
    for node in step:
      b, n = divmod(node, n_pad)
      for child in (batch.left[b, n], batch.right[b, n]):
        assert batch.left[b, child] < 0 or b * n_pad + child in done, "child not computed yet"
    done.update(step)
  internal = {b * n_pad + n for b, n in zip(*np.nonzero(batch.left >= 0))}
  assert done == internal and sum(map(len, steps)) == len(internal)


@settings(max_examples=60, deadline=None)
@given(nesteds=st.lists(nested_trees(max_leaves=8), min_size=1, max_size=4),
       width=st.integers(1, 5))
def test_hu_schedule_is_valid(nesteds, width):
  trees = [tree_of(n) for n in nesteds]
  batch = TreeBatchBuilder(VOCAB).build(trees, max_nodes=16, width=width)
  steps = hu_schedule(batch.left, batch.right, width)
  check_schedule(trees, steps, width)
  internal = sum(t.num_nodes // 2 for t in trees)
  assert len(steps) >= -(-internal // width)


def test_hu_schedule_is_optimal_on_known_forests():
  balanced = tree_of((("a", "x"), ("good", "movie")))
  chain = tree_of(((("a", "x"), "good"), "movie"))
  batch = TreeBatchBuilder(VOCAB).build([balanced, chain], max_nodes=8, width=2)
  # 6 internal nodes, chain height 3: 3 steps of 2 are needed and suffice.
  assert len(hu_schedule(batch.left, batch.right, 2)) == 3
  assert len(hu_schedule(batch.left, batch.right, 1)) == 6
  assert len(hu_schedule(batch.left, batch.right, 8)) == 3


def test_builder_lowers_words_candidates_and_deletable_sizes():
  space = space_of("[(Del,2),(Sub,1)]", {"good": ["fine", "x"], "movie": ["film"]})
  trees = [tree_of((("the", "a"), ("good", "movie")), 2), tree_of("to", 0)]
  batch = TreeBatchBuilder(VOCAB, space).build(trees, batch_size=3, width=4)
  assert batch.shape == (3, 8) and batch.substitutes.shape == (3, 8, 2)
  np.testing.assert_array_equal(batch.num_nodes, [7, 1, 0])
  the, a, good, movie = VOCAB["the"], VOCAB["a"], VOCAB["good"], VOCAB["movie"]
  np.testing.assert_array_equal(batch.token_ids[0, :7], [the, a, 0, good, movie, 0, 0])
  np.testing.assert_array_equal(batch.deletable[0, :7], [1, 1, 2, 0, 0, 0, 0])
  np.testing.assert_array_equal(batch.deletable[1, :1], [1])
  assert batch.labels[0, 6] == 2 and batch.labels[1, 0] == 0 and batch.labels[2, 0] == -1
  np.testing.assert_array_equal(batch.substitutes[0, 3], [VOCAB["fine"], VOCAB["x"]])
  np.testing.assert_array_equal(batch.substitute_mask[0, 4], [True, False])
  assert not batch.substitute_mask[0, :3].any()
  assert batch.schedule.shape == (8, 4)
  assert sorted(batch.schedule[batch.schedule < 24]) == [2, 5, 6]


def test_builder_errors_are_clear():
  builder = TreeBatchBuilder(VOCAB)
  tree = tree_of((("the", "a"), ("good", "movie")))
  with pytest.raises(ValueError, match="do not fit"):
    builder.build([tree], max_nodes=4)
  with pytest.raises(ValueError, match="steps"):
    builder.build([tree], width=1, num_steps=2)
  with pytest.raises(KeyError, match="unknown-word"):
    builder.build([tree_of("unknown-word")])
