"""The :class:`Certificate` every certification DP returns, and the :class:`CertifyResult` of the
one-call entry points."""

from __future__ import annotations

import collections.abc
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from arc_jax import interval as iv


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Certificate:
  """What certification proves about a batch: per example, or per node for models that classify
  every node of a tree (the node axis N, present when ``root`` is).

  Attributes:
    logits: Interval (B, K), or (B, N, K), containing the logits of every member of S(x) (a
      node's: of every tree its subtree becomes; the root's: every tree of S(t)).
    clean_logits: (B, K) or (B, N, K) logits of x itself.
    margins: (B, K) or (B, N, K) lower bounds of z_y − z_j over the same members (0 at j = y,
      and everywhere at unlabelled and padding nodes); computed through the last layer
      directly, which is tighter than subtracting the logit bounds.
    certified: (B,) bool, every margin with j ≠ y (the root's, with a node axis) is positive: no
      member of S(x) changes the prediction away from the label y. False for the padding rows of
      a tree batch.
    root: None without a node axis; else int32 (B,), the index of each example's root node.
  """

  logits: iv.Interval
  clean_logits: jax.Array
  margins: jax.Array
  certified: jax.Array
  root: jax.Array | None = None

  def at_root(self, x):
    """The example-level rows of ``x`` (arrays or boxes): ``x`` itself without a node axis, else
    row ``root[b]`` of (B, N, ...) for every b, (B, ...)."""
    if self.root is None:
      return x
    return jax.tree.map(lambda a: a[jnp.arange(a.shape[0]), self.root], x)

  @property
  def root_logits(self) -> iv.Interval:
    """The logit box (B, K) of every example (its root's)."""
    return self.at_root(self.logits)

  def per_example(self) -> Certificate:
    """This certificate without its node axis: every example's root (itself if it has none)."""
    return Certificate(self.root_logits, self.at_root(self.clean_logits),
                       self.at_root(self.margins), self.certified)

  @property
  def worst_case_logits(self) -> jax.Array:
    """Logits −margins (same shape as ``margins``): cross-entropy on them bounds the loss of
    every member of S(x)."""
    return -self.margins


def certified_by(margins: jax.Array, labels: jax.Array) -> jax.Array:
  """(B,) bool: every margin (B, K) of a class other than the label (B,) is positive."""
  others = jnp.arange(margins.shape[-1])[None, :] != labels[:, None]
  return jnp.all(jnp.where(others, margins > 0, True), axis=1)


def intersect(a: Certificate, b: Certificate, labels: jax.Array) -> Certificate:
  """The certificate of both ``a`` and ``b``, of the same batch (without node axis) and labels
  (B,): every logit end and margin the tighter of the two. Sound when both are: each bounds every
  member of S(x), so their intersection does; it is never looser than either, in floating point
  too (``max`` and ``min`` are exact). The clean logits are ``a``'s."""
  logits = iv.Interval(jnp.maximum(a.logits.lo, b.logits.lo),
                       jnp.minimum(a.logits.hi, b.logits.hi))
  margins = jnp.maximum(a.margins, b.margins)
  return Certificate(logits, a.clean_logits, margins, certified_by(margins, labels))


@dataclasses.dataclass(frozen=True, eq=False)
class CertifyResult(collections.abc.Mapping):
  """The per-example certificates of n examples, host (numpy) arrays in the input order: what
  :func:`arc_jax.certify.certify` and :func:`arc_jax.certify.certify_split` return, and what
  ``VerifyResult.certificates`` (:mod:`arc_jax.verify`) holds. A tree's rows are its root's.

  It is also a read-only mapping from these names to their arrays (``out["certified"]``,
  ``dict(out)``, ``np.savez(path, **out)``), the dict that ``certify`` returned before; a field
  that is None (``members`` outside split spaces) is not one of its keys.

  Attributes:
    certified: bool (n,): every margin of a class other than the label is positive, so no member
      of S(x) changes the prediction away from the label.
    margins: (n, K) lower bounds of z_y − z_j over every member of S(x) (0 at j = y).
    logits_lo: (n, K) lower bounds of the logits of every member of S(x).
    logits_hi: (n, K) upper bounds of the same.
    clean_logits: (n, K) the logits of x itself.
    members: int (n,), split spaces only: the members of S_aug(x) whose restricted spaces were
      certified (:class:`arc_jax.perturbation.split.SplitSpace`); None elsewhere.
  """

  certified: np.ndarray
  margins: np.ndarray
  logits_lo: np.ndarray
  logits_hi: np.ndarray
  clean_logits: np.ndarray
  members: np.ndarray | None = None

  def _names(self) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(self) if getattr(self, f.name) is not None)

  def __getitem__(self, name: str) -> np.ndarray:
    if name not in self._names():
      raise KeyError(name)
    return getattr(self, name)

  def __iter__(self):
    return iter(self._names())

  def __len__(self) -> int:
    """The number of keys (as the dict's), not of examples: that is ``len(out.certified)``."""
    return len(self._names())
