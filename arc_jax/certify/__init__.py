"""Certification: the memoizing DPs and the certify_fn entry points."""

from arc_jax.certify.api import (certification_order, certify, certify_jit, certify_model,
                                 make_certify_fn)
from arc_jax.certify.augmented import certify_split
from arc_jax.certify.certificate import Certificate, CertifyResult
from arc_jax.certify.deprecated import certify_trees  # deprecated, kept for one release
