"""Binary constituency trees of the Stanford Sentiment Treebank, with a label on every node.

A :class:`Tree` stores its nodes in post-order (children before parents, the root last), which is
the order a bottom-up Tree-LSTM visits them; leaves appear in sentence order. Leaf words are
separated by ASCII white space only: three SST leaves ("8\u00a01\\/2", "2\u00a01\\/2") hold a
no-break space and stay one leaf each. A tree's shape and leaf words alone are :data:`Nested`
pairs (:func:`to_nested`, :func:`from_nested`).
"""

from __future__ import annotations

import dataclasses
import re

from arc_jax.data.tokenize import normalize_ptb

_TREE_TOKEN = re.compile(r"\(|\)|[^ \t\r\n()]+")  # words may hold a no-break space ("8\u00a01\\/2")


Nested = str | tuple
"""A tree as nested pairs: a leaf word (``str``) or ``(left, right)``."""


class TreeSyntaxError(ValueError):
  """A malformed bracketed tree string."""


@dataclasses.dataclass(frozen=True)
class Tree:
  """A binary tree in post-order.

  Attributes:
    tokens: leaf words, left to right (length L).
    left: (num_nodes,) index of each node's left child, -1 at leaves.
    right: (num_nodes,) index of each node's right child, -1 at leaves.
    labels: (num_nodes,) sentiment label 0..4 of every node; ``labels[-1]`` is the root's.
  """

  tokens: tuple[str, ...]
  left: tuple[int, ...]
  right: tuple[int, ...]
  labels: tuple[int, ...]

  def __post_init__(self):
    n = len(self.labels)
    if not (len(self.left) == len(self.right) == n) or n != 2 * len(self.tokens) - 1:
      raise ValueError(
          f"A binary tree with {len(self.tokens)} leaves has {2 * len(self.tokens) - 1} nodes; "
          f"got {len(self.left)} left, {len(self.right)} right and {n} labels."
      )

  @property
  def label(self) -> int:
    """The root label."""
    return self.labels[-1]

  @property
  def num_nodes(self) -> int:
    return len(self.labels)

  @property
  def leaf_index(self) -> tuple[int, ...]:
    """(num_nodes,) index into :attr:`tokens` of each leaf node, -1 at internal nodes."""
    out, next_leaf = [], 0
    for left in self.left:
      out.append(next_leaf if left < 0 else -1)
      next_leaf += left < 0
    return tuple(out)

  def to_string(self) -> str:
    """The bracket form ``(label (label word) …)`` that :func:`parse_tree` reads."""
    parts = []
    for node, leaf in enumerate(self.leaf_index):
      if leaf >= 0:
        parts.append(f"({self.labels[node]} {self.tokens[leaf]})")
      else:
        right = parts.pop()
        parts.append(f"({self.labels[node]} {parts.pop()} {right})")
    return parts[0]


def parse_tree(text: str, *, lower: bool = True, unescape: bool = True) -> Tree:
  """Parses a PTB-style binary tree such as ``(3 (2 It) (4 (4 works) (2 .)))``.

  Args:
    text: one bracketed tree; every node is ``(label word)`` or ``(label left right)``.
    lower: lower-case the leaf words.
    unescape: undo PTB escapes in leaves (``-LRB-`` → ``(``, ``\\/`` → ``/``,
      ``\\*`` → ``*``).

  Raises:
    TreeSyntaxError: unbalanced brackets, a non-integer label, a node with other than 1 word or 2
      children, or trailing text; the message gives the token position.
  """
  tokens = [(m.group(), m.start()) for m in _TREE_TOKEN.finditer(text)]
  words, left, right, labels = [], [], [], []
  stack = []  # open nodes: [label, [child node indices], word or None]

  def fail(message, pos):
    return TreeSyntaxError(f"{message} at character {pos} of {text[:80]!r}.")

  i = 0
  while i < len(tokens):
    tok, pos = tokens[i]
    if tok == "(":
      if i + 1 >= len(tokens) or not tokens[i + 1][0].lstrip("-").isdigit():
        raise fail("Expected an integer label after '('", pos)
      if not stack and labels:
        raise fail("Trailing text after the root node", pos)
      stack.append([int(tokens[i + 1][0]), [], None])
      i += 2
      continue
    if not stack:
      raise fail(f"Unexpected {tok!r} outside any node", pos)
    node = stack[-1]
    if tok == ")":
      label, children, word = stack.pop()
      if word is not None and not children:
        words.append(word)
        left.append(-1)
        right.append(-1)
      elif word is None and len(children) == 2:
        left.append(children[0])
        right.append(children[1])
      else:
        raise fail("A node needs exactly one word or two children", pos)
      labels.append(label)
      if stack:
        stack[-1][1].append(len(labels) - 1)
    elif node[2] is not None or node[1]:
      raise fail(f"Unexpected word {tok!r} (a leaf has one word, an inner node only children)", pos)
    else:
      node[2] = tok
    i += 1
  if stack or not labels:
    raise fail("Unbalanced brackets", len(text))
  if lower:
    words = [w.lower() for w in words]
  if unescape:
    words = [normalize_ptb(w) for w in words]
  return Tree(tuple(words), tuple(left), tuple(right), tuple(labels))


def to_nested(tree: Tree) -> Nested:
  """``tree`` as nested pairs of leaf words."""
  stack = []
  for leaf in tree.leaf_index:
    if leaf >= 0:
      stack.append(tree.tokens[leaf])
    else:
      right = stack.pop()
      stack.append((stack.pop(), right))
  return stack[0]


def from_nested(nested: Nested, root_label: int = -1) -> Tree:
  """A post-order :class:`Tree` from nested pairs; every label is -1 (none) but the root's."""
  tokens, left, right = [], [], []

  def visit(node):
    if isinstance(node, str):
      tokens.append(node)
      left.append(-1)
      right.append(-1)
    else:
      a = visit(node[0])
      b = visit(node[1])
      left.append(a)
      right.append(b)
    return len(left) - 1

  visit(nested)
  labels = [-1] * len(left)
  labels[-1] = root_label
  return Tree(tuple(tokens), tuple(left), tuple(right), tuple(labels))
