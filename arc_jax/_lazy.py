"""Package namespaces filled on first use (PEP 562), so that importing a package, and with it a
command's ``--help``, does not start JAX: ``arc_jax``, ``arc_jax.perturbation`` and
``arc_jax.train`` re-export names of their modules without importing those modules first."""

from __future__ import annotations

import importlib
import sys
from typing import Callable, Mapping, Sequence


def lazy_exports(package: str, modules: Mapping[str, Sequence[str]]
                 ) -> tuple[Callable[[str], object], Callable[[], list[str]], list[str]]:
  """``(__getattr__, __dir__, __all__)`` of ``package``, whose public names are those of
  ``modules`` (module name → the names the package re-exports from it).

  A name's module is imported when the name is first looked up (``package.name``, ``from package
  import name``); the name is then kept in the package's namespace.
  """
  home = {name: module for module, names in modules.items() for name in names}

  def __getattr__(name: str):
    if name not in home:
      raise AttributeError(f"module {package!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home[name]), name)
    setattr(sys.modules[package], name, value)
    return value

  def __dir__() -> list[str]:
    return sorted(set(vars(sys.modules[package])) | set(home))

  return __getattr__, __dir__, sorted(home)
