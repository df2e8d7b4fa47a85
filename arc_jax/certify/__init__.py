"""Certification: the memoizing DPs and the certify_fn entry points."""

from arc_jax.certify.api import Certificate, certify, certify_jit, certify_model, certify_trees, make_certify_fn
