"""Packages callable as their entry point: ``arc_jax.certify(...)`` is
``arc_jax.certify.certify(...)`` and ``arc_jax.verify(...)`` is ``arc_jax.verify.verify(...)``,
so the top-level names of the one-call entry points are also those of their packages."""

from __future__ import annotations

import sys
import types


def callable_as(package: str, function: str) -> None:
  """Makes the (imported) module ``package`` callable: calling it calls its attribute
  ``function`` with the same arguments."""

  class CallablePackage(types.ModuleType):
    """A module that calls its entry point when called."""

    def __call__(self, *args, **kwargs):
      return getattr(self, function)(*args, **kwargs)

  sys.modules[package].__class__ = CallablePackage
