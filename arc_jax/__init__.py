"""arc_jax: certify and train LSTM-family classifiers robust to programmable string perturbations."""

from arc_jax.perturbation import (Plan, PlanBuilder, Space, SpecError, Transformation, custom,
                                  parse_space, register_transformation)

__version__ = "0.2.0"



def __getattr__(name):
  """``arc_jax.load_run`` (:func:`arc_jax.evaluation.load_run`) without importing the training
  stack with the package."""
  if name == "load_run":
    from arc_jax.evaluation import load_run  # pylint: disable=import-outside-toplevel
    return load_run
  raise AttributeError(f"module 'arc_jax' has no attribute {name!r}")


__all__ = [
    "Plan",
    "PlanBuilder",
    "Space",
    "SpecError",
    "Transformation",
    "__version__",
    "custom",
    "load_run",
    "parse_space",
    "register_transformation",
]
