"""arc_jax: certify and train LSTM-family classifiers robust to programmable string perturbations."""

from arc_jax._lazy import lazy_exports

__version__ = "0.2.0"

# Imported on first use (arc_jax._lazy): `import arc_jax` starts no JAX, and `arc_jax.load_run`
# does not import the training stack with the package.
__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "arc_jax.perturbation": ("Plan", "PlanBuilder", "Space", "SpecError", "Transformation",
                             "custom", "parse_space", "register_transformation"),
    "arc_jax.evaluation": ("load_run",),
})
__all__ = sorted([*__all__, "__version__"])
