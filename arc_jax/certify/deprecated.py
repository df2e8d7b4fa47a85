"""Names of the previous release, kept for one release: each warns with a DeprecationWarning
that names its replacement (a function when called, a class when read), then does what the
replacement does.

* ``arc_jax.certify.certify_trees(model, space, trees, vocab, labels=None)``: use
  ``arc_jax.certify.certify(model, space, trees, labels, vocab)`` (labels before the vocabulary).
* ``arc_jax.certify.tree_dp.certify_tree_jit``: use :data:`arc_jax.certify.certify_jit` (every
  family; ``budgets=`` and ``join=`` as keywords).
* ``arc_jax.certify.tree_dp.make_tree_certify_fn``: use :func:`arc_jax.certify.make_certify_fn`.
* ``arc_jax.certify.tree_dp.TreeCertificate``: use :class:`arc_jax.certify.Certificate` (with a
  node axis).
* ``verify(graphdef, state, space, ...)`` and ``verify(..., rows=)``: use
  ``verify(model, space, ..., batch_size=)`` (:func:`arc_jax.verify.verify`).
"""

from __future__ import annotations

import warnings
from typing import Callable, Mapping, Sequence

from arc_jax import interval as iv
from arc_jax.certify.certificate import Certificate, CertifyResult
from arc_jax.domain import Domain


def deprecated(old: str, new: str, stacklevel: int = 3) -> None:
  """Warns that ``old`` is deprecated (kept for one release) and names ``new``; the warning
  points ``stacklevel`` frames up (3: the caller of the function that calls this one)."""
  warnings.warn(f"{old} is deprecated and will be removed in the next release: use {new}.",
                DeprecationWarning, stacklevel=stacklevel)


def certify_trees(model, space, trees: Sequence, vocab: Mapping[str, int],
                  labels: Sequence[int] | None = None, **options) -> CertifyResult:
  """Deprecated: ``arc_jax.certify.certify(model, space, trees, labels, vocab, **options)``
  (the labels before the vocabulary)."""
  from arc_jax.certify.api import certify  # pylint: disable=import-outside-toplevel
  deprecated("arc_jax.certify.certify_trees(model, space, trees, vocab, labels)",
             "arc_jax.certify.certify(model, space, trees, labels, vocab)")
  return certify(model, space, trees, labels, vocab, **options)


def certify_tree_jit(graphdef, signature, state, batch, labels, eps=1.0, dropout_key=None,
                     budgets=None, *, join: str = "after_cell", domain: Domain = iv.SOUND
                     ) -> Certificate:
  """Deprecated: ``arc_jax.certify.certify_jit(graphdef, signature, state, batch, labels, eps,
  dropout_key, budgets=budgets, join=join, domain=domain)``."""
  from arc_jax.certify.api import certify_jit  # pylint: disable=import-outside-toplevel
  deprecated("arc_jax.certify.tree_dp.certify_tree_jit",
             "arc_jax.certify.certify_jit (budgets= and join= as keywords)")
  return certify_jit(graphdef, signature, state, batch, labels, eps, dropout_key,
                     budgets=budgets, join=join, domain=domain)


def make_tree_certify_fn(graphdef, space, join: str = "after_cell", domain: Domain = iv.SOUND
                         ) -> Callable[..., Certificate]:
  """Deprecated: ``arc_jax.certify.make_certify_fn(graphdef, space, domain, join=join)``, whose
  function takes ``budgets=`` as a keyword; this one's takes it positionally:
  ``certify_tree_fn(state, batch, labels, eps=1.0, dropout_key=None, budgets=None)``."""
  from arc_jax.certify.api import make_certify_fn  # pylint: disable=import-outside-toplevel
  deprecated("arc_jax.certify.tree_dp.make_tree_certify_fn",
             "arc_jax.certify.make_certify_fn(graphdef, space, domain, join=join)")
  certify_fn = make_certify_fn(graphdef, space, domain, join=join)

  def certify_tree_fn(state, batch, labels, eps=1.0, dropout_key=None, budgets=None):
    return certify_fn(state, batch, labels, eps, dropout_key, budgets=budgets)

  return certify_tree_fn


def tree_dp_attribute(name: str):
  """``arc_jax.certify.tree_dp.__getattr__``: its deprecated names (the functions warn when
  called, ``TreeCertificate`` when read), else an AttributeError."""
  if name in ("certify_tree_jit", "make_tree_certify_fn"):
    return globals()[name]
  if name == "TreeCertificate":
    deprecated("arc_jax.certify.tree_dp.TreeCertificate",
               "arc_jax.certify.Certificate (it has a node axis)", stacklevel=4)
    return Certificate
  raise AttributeError(f"module 'arc_jax.certify.tree_dp' has no attribute {name!r}")
