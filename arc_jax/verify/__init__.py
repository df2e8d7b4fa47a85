"""Complete verification: exact robustness by certified branch and bound over sub-spaces of S(x)."""

from arc_jax.verify.subspaces import SubSpace, count, full, lower, members, split, splittable
from arc_jax.verify.verifier import NOT_ROBUST, ROBUST, UNKNOWN, WINDOW_RULES, Verdict, VerifyResult, verify
