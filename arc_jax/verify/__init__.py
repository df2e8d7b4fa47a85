"""Complete verification: exact robustness by certified branch and bound over sub-spaces of S(x).

The package is callable as its :func:`verify` (``arc_jax.verify(model, space, ...)``)."""

from arc_jax._callable import callable_as
from arc_jax.verify.subspaces import SubSpace, count, full, lower, members, split, splittable
from arc_jax.verify.verifier import (DEFAULT_WINDOW_RULE, NOT_ROBUST, ROBUST, UNKNOWN, WINDOW_RULES,
                                    Verdict, VerifyResult, verify)

callable_as(__name__, "verify")
