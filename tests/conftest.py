"""Test-wide settings."""

import resource

from hypothesis import settings

# XLA compiles on the calling thread and its passes recurse deeply on large programs (the sound
# interval DPs under vmap and grad): let the main thread's stack grow past the usual 8 MiB.
_soft, _hard = resource.getrlimit(resource.RLIMIT_STACK)
_limit = 1 << 30 if _hard == resource.RLIM_INFINITY else _hard
if _soft != resource.RLIM_INFINITY and _soft < _limit:
  resource.setrlimit(resource.RLIMIT_STACK, (_limit, _hard))

# A property test's first example compiles its jitted functions, and the machines running the
# suite are shared: wall-clock deadlines would fail tests for the load, not for the code.
settings.register_profile("arc_jax", deadline=None)
settings.load_profile("arc_jax")
