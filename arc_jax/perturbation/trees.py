"""Tree perturbation spaces for Tree-LSTMs, their exact enumeration, and tree batches lowered for
them.

Paper: "Extension to Bi-LSTMs and Tree-LSTMs" and appendix "Handling Tree-LSTMs". A tree space is
written with the same spec strings as a string space (``"[(Del,2),(Sub,2)]"``): parse it with
:func:`~arc_jax.perturbation.parse_space` (which brings the synonyms and stop words) and pass the
result to :func:`tree_space`, which maps each transformation to its tree counterpart:

==========  ==========  ===================================================================
s→t         tree name   rewrite of one leaf of the original tree
==========  ==========  ===================================================================
1→0         T_DelStop   remove a leaf (Del: a stop word); its sibling takes the parent's place
1→2, w→ww   T_Dup       the leaf becomes an internal node with two leaves holding its word
1→1         T_SubSyn    the leaf's word becomes one of its replacements (Sub: its synonyms)
==========  ==========  ===================================================================

:func:`tree_space` assigns each transformation its tree rewrite by what it *does* (its s→t
shape, and for 1→2 whether it only repeats the word: ``repeats_token``, as Ins, Dup and Trans4
declare and :meth:`~arc_jax.perturbation.Transformation.replacements` checks), never by its
name; the words each leaf can be deleted from, duplicated or replaced by come from the
transformation itself. Anything else is refused with its name: windows of several tokens
(Trans1–3, s > 1), a 1→2 rewrite into other words, or two transformations of the same kind.

**The tree space S(t).** An *application choice* assigns to every leaf of the original tree t at
most one rewrite (the rewrites are applied at distinct leaves of the original tree, in parallel,
as for strings), with at most δ_k leaves rewritten by T_k. Its tree is obtained by (1) giving each
substituted leaf its new word, (2) turning each duplicated leaf into an internal node whose two
children are leaves with the word, and (3) removing every deleted leaf: an internal node left with
one child is replaced by that child, and a node left with no child disappears as well (so a whole
subtree of stop words goes when all its leaves are deleted, costing one deletion per leaf: the
paper's *deletable* subtrees, of size ≤ the remaining Del budget). A choice that deletes every leaf
leaves no tree and is not part of the space. S(t) is the set of distinct resulting trees, as
structures with leaf words (node labels are not part of a perturbed tree). This is the set the
paper's transition equations describe (merge: the children's budgets add up; Del: a deletable
child of size d lets the node be its sibling's state at budget c − d·e_Del; Sub and Dup: leaf
states at c = e_Sub and c = e_Dup), which ``tests/perturbation/test_tree_perturbation.py`` checks
at set level.

Differences from the original implementation (docs/ORIGINAL.md §4, §8 item 7): its slots hold the
plain leaf in every budget ("at most" semantics) and its Sub box includes the original word; here
slots are tight (exactly c_k rewrites) and a Sub slot holds the synonyms only. Both describe the
same union over the budgets.

**Batches.** :class:`TreeBatch` is a batch of padded trees and its schedule
(:class:`~arc_jax.data.tree_batching.PaddedTrees`, the structure) with what the space does to
each leaf (deletable subtrees, duplicable leaves, Sub candidates), as a
:class:`~arc_jax.perturbation.Plan` lowers a :class:`~arc_jax.data.Batch` of sentences.
"""

from __future__ import annotations

import dataclasses
from typing import Iterator, Mapping, Sequence

import jax
import numpy as np

from arc_jax.data.tree_batching import OOV_FIX, PaddedTrees, pad_trees
from arc_jax.data.trees import Nested, Tree, to_nested
from arc_jax.padding import NODE_BUCKETS, STEP_BUCKETS, pow2_at_least, word_ids
from arc_jax.perturbation.spaces import Space

DEL, DUP, SUB = "Del", "Dup", "Sub"


@dataclasses.dataclass(frozen=True)
class TreeSignature:
  """All the tree DP needs to know of a tree space: which rewrite each budget axis counts.

  Hashable, so jitted functions take it as a static argument.

  Attributes:
    kinds: per axis, ``"Del"``, ``"Dup"`` or ``"Sub"`` (each at most once).
    budgets: δ per axis.
  """

  kinds: tuple[str, ...]
  budgets: tuple[int, ...]

  @property
  def signature(self) -> TreeSignature:
    return self

  @property
  def grid(self) -> tuple[int, ...]:
    """Shape of the decomposition grid, (δ_1+1, …, δ_m+1)."""
    return tuple(d + 1 for d in self.budgets)

  def axis(self, kind: str) -> int | None:
    """The axis counting ``kind``, or None when the space does not use it (δ = 0 counts)."""
    return self.kinds.index(kind) if kind in self.kinds and self.budgets[
        self.kinds.index(kind)] > 0 else None

  @property
  def added_nodes(self) -> int:
    """The most nodes a tree of S(t) has beyond t's: each duplicated leaf becomes three nodes."""
    dup = self.axis(DUP)
    return 0 if dup is None else 2 * self.budgets[dup]


@dataclasses.dataclass(frozen=True)
class TreeSpace:
  """A perturbation space over trees (see the module docstring for its exact meaning).

  Attributes:
    space: the string space whose Del / Ins (Dup) / Sub transformations supply the stop words and
      synonyms; restrict it to the model's vocabulary first.
    kinds: the tree rewrite of each of its transformations.
  """

  space: Space
  kinds: tuple[str, ...]

  def __str__(self):
    return str(self.space)

  @property
  def budgets(self) -> tuple[int, ...]:
    return self.space.budgets

  @property
  def signature(self) -> TreeSignature:
    return TreeSignature(self.kinds, self.budgets)

  def leaf_rewrites(self, word: str) -> list[tuple[int, Nested | None]]:
    """(axis, result) of every rewrite of a leaf holding ``word``; None is a deletion."""
    out = []
    for k, (kind, t) in enumerate(zip(self.kinds, self.space.transformations)):
      if self.budgets[k] == 0:
        continue
      for r in t.replacements((word,)):
        out.append((k, leaf_result(kind, r)))
    return out

  def is_deletable(self, word: str) -> bool:
    return any(result is None for _, result in self.leaf_rewrites(word))

  def is_duplicable(self, word: str) -> bool:
    return any(self.kinds[k] == DUP for k, _ in self.leaf_rewrites(word))

  def substitutes(self, word: str) -> list[str]:
    k = self.signature.axis(SUB)
    return [] if k is None else [r[0] for r in self.space.transformations[k].replacements((word,))]

  def enumerate(self, tree: Tree) -> Iterator[Nested]:
    """Yields every tree of S(tree) exactly once, the unperturbed tree first.

    Walks the application choices leaf by leaf (pruned by the budgets) and builds each choice's
    tree by the definition; cost proportional to the number of choices times the tree size.
    """
    options = [self.leaf_rewrites(w) for w in tree.tokens]
    seen = set()

    def walk(i, budget, chosen):
      if i == len(options):
        yield chosen
        return
      yield from walk(i + 1, budget, chosen + (tree.tokens[i],))
      for k, result in options[i]:
        if budget[k]:
          yield from walk(i + 1, budget[:k] + (budget[k] - 1,) + budget[k + 1:],
                          chosen + (result,))

    for leaves in walk(0, self.budgets, ()):
      out = rewrite_leaves(tree, leaves)
      nested = None if out is None else to_nested(out)
      if nested is not None and nested not in seen:
        seen.add(nested)
        yield nested

  def count(self, tree: Tree) -> int:
    """The exact number of application choices of ``tree`` (Python int, no enumeration).

    Equals the number of choices :meth:`enumerate` visits (before it removes duplicates); the
    choice deleting every leaf is not counted.
    """
    dec = [tuple(c) for c in np.ndindex(*self.signature.grid)]
    ways = {c: 0 for c in dec}
    ways[(0,) * len(self.kinds)] = 1
    for word in tree.tokens:
      options = self.leaf_rewrites(word)
      new = dict(ways)
      for c in dec:
        for k, _ in options:
          if c[k]:
            new[c] += ways[c[:k] + (c[k] - 1,) + c[k + 1:]]
      ways = new
    k_del = self.signature.axis(DEL)
    everything_deleted = (k_del is not None and len(tree.tokens) <= self.budgets[k_del]
                          and all(self.is_deletable(w) for w in tree.tokens))
    return sum(ways.values()) - everything_deleted


def tree_kind(t) -> str:
  """The tree rewrite of a string transformation, by what it does (see the module docstring).

  Raises:
    ValueError: naming ``t``, when the tree DP cannot represent it.
  """
  if t.s == 1 and t.t == 0:
    return DEL
  if t.s == 1 and t.t == 1:
    return SUB
  if t.s == 1 and t.t == 2 and t.repeats_token:
    return DUP
  what = ("rewrites a leaf into two other words (a tree leaf can only be duplicated: w → w w, "
          "declared with custom(..., repeats_token=True))" if (t.s, t.t) == (1, 2) else
          f"rewrites windows of {t.s} tokens into {t.t}" if t.s > 1 else f"makes {t.t} tokens")
  raise ValueError(
      f"{t.name} ({t.s}→{t.t}) has no tree counterpart: it {what}. Tree spaces are made of "
      "deletions (1→0), substitutions (1→1) and duplications (1→2, w → w w) of single leaves.")


def tree_space(space: Space) -> TreeSpace:
  """The tree counterpart of a string space of deletions, substitutions and duplications.

  Raises:
    ValueError: a transformation the tree DP cannot represent (:func:`tree_kind`), or two
      transformations with the same tree rewrite (e.g. Ins and Dup).
  """
  kinds = []
  for t in space.transformations:
    kind = tree_kind(t)
    if kind in kinds:
      other = space.transformations[kinds.index(kind)].name
      raise ValueError(f"{space} has two transformations with the tree rewrite T_{kind}, "
                       f"{other} and {t.name}; a tree space holds each rewrite once: merge them "
                       "into one transformation with one budget.")
    kinds.append(kind)
  return TreeSpace(space, tuple(kinds))


def leaf_result(kind: str, replacement: tuple[str, ...]) -> Nested | None:
  """What a leaf becomes under the tree rewrite ``kind`` whose string transformation writes
  ``replacement``: None (Del), the pair of copies (Dup) or the synonym (Sub)."""
  return None if kind == DEL else replacement if kind == DUP else replacement[0]


def rewrite_leaves(tree: Tree, leaves: Sequence[Nested | None]) -> Tree | None:
  """The tree of ``tree`` whose leaves became ``leaves`` (a word, a pair of words, or None =
  deleted), contracted as in the module docstring; None when every leaf is deleted.

  Node labels carry over to what each node of ``tree`` became: a kept or substituted leaf and a
  node keeping both children keep their labels; a duplicated leaf becomes an internal node with
  two leaves, all three with the leaf's label; a node left with one child is replaced by that
  child, which takes the node's label (the node's subtree *became* that child's, so the root
  always keeps the root label, as the certificate's per-node labels assume).
  """
  tokens, left, right, labels = [], [], [], []

  def add(label, word=None, children=(-1, -1)):
    if word is not None:
      tokens.append(word)
    left.append(children[0])
    right.append(children[1])
    labels.append(label)
    return len(labels) - 1

  stack = []  # per visited node of ``tree``: the index of what it became, or None
  for node, leaf in enumerate(tree.leaf_index):
    label = tree.labels[node]
    if leaf >= 0:
      new = leaves[leaf]
      if new is None or isinstance(new, str):
        stack.append(None if new is None else add(label, new))
      else:
        stack.append(add(label, children=(add(label, new[0]), add(label, new[1]))))
      continue
    r, l = stack.pop(), stack.pop()
    if l is None or r is None:
      survivor = r if l is None else l
      if survivor is not None:
        labels[survivor] = label
      stack.append(survivor)
    else:
      stack.append(add(label, children=(l, r)))
  if stack[0] is None:
    return None
  return Tree(tuple(tokens), tuple(left), tuple(right), tuple(labels))


# ---------------------------------------------------------------------------------------------
# Padded batches.


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class TreeBatch(PaddedTrees):
  """Padded trees (:class:`~arc_jax.data.tree_batching.PaddedTrees`: token ids, children, labels,
  node counts, schedule) lowered for the certification DP of a tree space.

  Attributes (besides those of the padded trees):
    substitutes: int32 (B, N, R), Sub candidates of each leaf (0 beyond ``substitute_mask``).
    substitute_mask: bool (B, N, R).
    deletable: int32 (B, N), number of leaves of each node's subtree if Del can delete all of
      them (every leaf a stop word), else 0.
    duplicable: bool (B, N), leaves whose word the space's duplication (T_Dup) matches.
    signature: the tree space the batch was lowered for (None: no space), static. The DP
      refuses a batch lowered for another space (its candidates and deletable sizes would not
      describe the space it certifies).
  """

  substitutes: np.ndarray
  substitute_mask: np.ndarray
  deletable: np.ndarray
  duplicable: np.ndarray
  signature: TreeSignature | None = dataclasses.field(default=None, metadata=dict(static=True))


class TreeBatchBuilder:
  """Lowers lists of :class:`~arc_jax.data.Tree` into :class:`TreeBatch` for a fixed space.

  Args:
    vocab: word → id (0 is padding). Every leaf word and every Sub candidate must be in it
      (restrict the space with ``space.restricted_to(vocab)`` before :func:`tree_space`).
    space: the tree space (None: plain batches for the concrete forward pass).
    node_buckets: allowed N.
    step_buckets: allowed S.
    min_substitutes: lower bound on R (e.g. the lexicon's largest candidate list, so one shape
      serves a whole dataset).
    width: W, nodes per step. Larger widths need fewer steps (better on accelerators); on CPU
      about 32 keeps a step's working set in cache.
  """

  def __init__(self, vocab: Mapping[str, int], space: TreeSpace | None = None,
               node_buckets: Sequence[int] = NODE_BUCKETS,
               step_buckets: Sequence[int] = STEP_BUCKETS, min_substitutes: int = 1,
               width: int = 32):
    self.vocab = vocab
    self.space = space
    self.node_buckets = tuple(node_buckets)
    self.step_buckets = tuple(step_buckets)
    self.min_substitutes = min_substitutes
    self.width = width
    self._cache = {}

  def _leaf(self, word: str) -> tuple[int, bool, tuple[int, ...]]:
    """(1 if Del can delete it else 0, whether Dup matches it, Sub candidate ids) of a leaf word
    (cached)."""
    if word not in self._cache:
      space = self.space
      self._cache[word] = (
          int(space is not None and space.is_deletable(word)),
          space is not None and space.is_duplicable(word),
          () if space is None else tuple(word_ids(self.vocab, space.substitutes(word), OOV_FIX)))
    return self._cache[word]

  def build(self, trees: Sequence[Tree], batch_size: int | None = None, *,
            max_nodes: int | None = None, width: int | None = None,
            num_steps: int | None = None) -> TreeBatch:
    """Pads ``trees`` into one batch (:func:`~arc_jax.data.tree_batching.pad_trees`) and adds
    what the space does to each leaf.

    Args:
      trees: the trees (post-order).
      batch_size: B (default: ``len(trees)``).
      max_nodes: N (default: the node bucket of the largest tree).
      width: W (default: the builder's).
      num_steps: S (default: the step bucket of the number of steps needed).

    Raises:
      ValueError: the trees do not fit in the requested B, N or S.
    """
    padded = pad_trees(trees, self.vocab, batch_size, max_nodes=max_nodes,
                       width=self.width if width is None else width, num_steps=num_steps,
                       node_buckets=self.node_buckets, step_buckets=self.step_buckets)
    rows, n_pad = padded.shape
    deletable = np.zeros((rows, n_pad), np.int32)
    duplicable = np.zeros((rows, n_pad), bool)
    hits = []  # (b, node, Sub candidate ids) of the leaves with candidates
    for b, tree in enumerate(trees):
      row_deletable = [0] * tree.num_nodes
      for node, leaf in enumerate(tree.leaf_index):
        if leaf >= 0:
          row_deletable[node], duplicable[b, node], subs = self._leaf(tree.tokens[leaf])
          if subs:
            hits.append((b, node, subs))
        else:
          l, r = row_deletable[tree.left[node]], row_deletable[tree.right[node]]
          row_deletable[node] = l + r if l and r else 0
      deletable[b, :tree.num_nodes] = row_deletable
    r_pad = pow2_at_least(max([len(ids) for *_, ids in hits] + [self.min_substitutes]))
    substitutes = np.zeros((rows, n_pad, r_pad), np.int32)
    substitute_mask = np.zeros((rows, n_pad, r_pad), bool)
    for b, node, ids in hits:
      substitutes[b, node, :len(ids)] = ids
      substitute_mask[b, node, :len(ids)] = True
    return TreeBatch(**{f.name: getattr(padded, f.name) for f in dataclasses.fields(PaddedTrees)},
                     substitutes=substitutes, substitute_mask=substitute_mask,
                     deletable=deletable, duplicable=duplicable,
                     signature=None if self.space is None else self.space.signature)
