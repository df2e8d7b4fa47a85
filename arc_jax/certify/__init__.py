"""Certification: the memoizing DPs, the certify_fn entry points (:mod:`arc_jax.certify.api`,
which dispatch on the model's type to the model kinds' modules: :mod:`arc_jax.certify.sequence`,
:mod:`arc_jax.certify.trees`, imported here so that they register), and the one-call entry points
of every model family: :func:`certify` (a space), :func:`certify_split` (a split space, ARC-A3T
and A3T) and ``verify`` (exact answers, :func:`arc_jax.verify.verify`, imported on first use),
which return per-example :class:`CertifyResult` arrays (``verify``: a richer result holding
them).

The package is callable as its :func:`certify` (``arc_jax.certify(model, space, ...)``)."""

import importlib

from arc_jax._callable import callable_as
from arc_jax.certify import sequence, trees  # each registers its model kind with the entry points
from arc_jax.certify.api import certify, certify_jit, certify_model, make_certify_fn
from arc_jax.certify.augmented import certify_split
from arc_jax.certify.certificate import Certificate, CertifyResult
from arc_jax.certify.deprecated import certify_trees  # deprecated, kept for one release
from arc_jax.certify.sequence import certification_order

callable_as(__name__, "certify")


def __getattr__(name):
  """``verify``, imported on first use (:mod:`arc_jax.verify` imports this package)."""
  if name == "verify":
    return importlib.import_module("arc_jax.verify").verify
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
