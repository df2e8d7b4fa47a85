"""Checks on calls of the certify API: errors in one line, and a bound on certify_jit's traces."""

import re

import chex
import jax
import pytest

from arc_jax.certify import api


def one_line(pattern):
  """``pytest.raises`` of a ValueError whose message is one line and matches ``pattern``."""
  return pytest.raises(ValueError, match=re.compile(f"^(?!.*\\n).*{pattern}"))


CERTIFY_MODEL = api.certify_model


def trace_at_most(monkeypatch, n):
  """Lets the library's own ``certify_jit`` trace its program at most ``n`` more times.

  ``certify_jit`` jits ``_certify_state``, which calls ``api.certify_model`` once per trace:
  wrapped in ``chex.assert_max_traces``, a trace beyond ``n`` raises. JAX's caches are cleared
  first, so programs compiled by earlier tests do not hide this test's traces.
  """
  jax.clear_caches()
  chex.clear_trace_counter()
  monkeypatch.setattr(api, "certify_model", chex.assert_max_traces(CERTIFY_MODEL, n=n))
