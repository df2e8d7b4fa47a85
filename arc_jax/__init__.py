"""arc_jax: certify and train LSTM-family classifiers robust to programmable string perturbations."""

import importlib

from arc_jax._lazy import lazy_exports

__version__ = "0.2.0"

# Imported on first use (arc_jax._lazy): `import arc_jax` starts no JAX, and `arc_jax.load_run`
# does not import the training stack with the package.
_exported, _names, __all__ = lazy_exports(__name__, {
    "arc_jax.perturbation": ("Plan", "PlanBuilder", "Space", "SpecError", "Transformation",
                             "custom", "parse_space", "register_transformation"),
    "arc_jax.perturbation.split": ("split_space",),
    "arc_jax.certify": ("CertifyResult", "certify_split"),
    "arc_jax.evaluation": ("load_run",),
})

ENTRY_PACKAGES = ("certify", "verify")
"""Subpackages callable as their entry points (``arc_jax.certify(model, space, ...)`` is
:func:`arc_jax.certify.certify`, ``arc_jax.verify(...)`` :func:`arc_jax.verify.verify`),
imported on first use like the names above."""


def __getattr__(name: str):
  """The names above and :data:`ENTRY_PACKAGES`, imported when first looked up."""
  if name in ENTRY_PACKAGES:
    return importlib.import_module(f"{__name__}.{name}")
  return _exported(name)


def __dir__() -> list[str]:
  return sorted({*_names(), *ENTRY_PACKAGES})


__all__ = sorted([*__all__, *ENTRY_PACKAGES, "__version__"])
