"""The SST tree parser and the post-order Tree type."""

import pytest

from arc_jax.data.trees import Tree, TreeSyntaxError, parse_tree


def test_parse_post_order():
  tree = parse_tree("(3 (2 It) (4 (4 works) (2 .)))")
  assert tree.tokens == ("it", "works", ".")
  # post-order: It, works, ., (works .), root
  assert tree.left == (-1, -1, -1, 1, 0)
  assert tree.right == (-1, -1, -1, 2, 3)
  assert tree.labels == (2, 4, 2, 4, 3)
  assert tree.label == 3 and tree.num_nodes == 5
  assert tree.leaf_index == (0, 1, 2, -1, -1)


def test_round_trip_and_single_leaf():
  text = "(1 (2 (0 a) (1 b)) (3 c))"
  assert parse_tree(text).to_string() == text
  leaf = parse_tree("(4 Fine)")
  assert leaf.tokens == ("fine",) and leaf.labels == (4,) and leaf.left == (-1,)


def test_case_and_escapes():
  tree = parse_tree(r"(2 (2 -LRB-) (2 (2 Writer\/Director) (2 -RRB-)))")
  assert tree.tokens == ("(", "writer/director", ")")
  raw = parse_tree(r"(2 (2 -LRB-) (2 \*))", lower=False, unescape=False)
  assert raw.tokens == ("-LRB-", r"\*")


def test_no_break_space_stays_inside_a_leaf():
  tree = parse_tree("(2 (2 8\u00a01\\/2) (2 .))")
  assert tree.tokens == ("8\u00a01/2", ".")


@pytest.mark.parametrize("text, message", [
    ("(3 (2 a) (2 b)", "Unbalanced"),
    ("(3 (2 a) (2 b)))", "outside any node"),
    ("(x (2 a) (2 b))", "integer label"),
    ("(3 (2 a) (2 b) (2 c))", "exactly one word or two children"),
    ("(3 (2 a))", "exactly one word or two children"),
    ("(3 (2 a) b (2 c))", "Unexpected word 'b'"),
    ("(2 a b)", "Unexpected word 'b'"),
    ("(2 a) (2 b)", "Trailing text"),
    ("", "Unbalanced"),
])
def test_syntax_errors(text, message):
  with pytest.raises(TreeSyntaxError, match=message):
    parse_tree(text)


def test_tree_checks_node_count():
  with pytest.raises(ValueError, match="2 leaves has 3 nodes"):
    Tree(("a", "b"), (-1, -1), (-1, -1), (1, 1))
