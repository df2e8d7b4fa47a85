"""arc_jax: certify and train LSTM-family classifiers robust to programmable string perturbations."""

from arc_jax.perturbation import Plan, PlanBuilder, Space, SpecError, Transformation, custom, parse_space

__version__ = "0.2.0"

__all__ = [
    "Plan",
    "PlanBuilder",
    "Space",
    "SpecError",
    "Transformation",
    "__version__",
    "custom",
    "parse_space",
]
