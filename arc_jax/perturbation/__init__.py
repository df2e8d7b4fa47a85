"""The perturbation-space language: transformations, spaces, enumeration, counting, DP plans.

The names below are imported on first use (:mod:`arc_jax._lazy`): the plans need JAX, the
spaces and their shapes do not.
"""

from arc_jax._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "arc_jax.padding": ("LENGTH_BUCKETS", "bucket"),
    "arc_jax.perturbation.plans": ("Plan", "PlanBuilder", "TransformationPlan",
                                   "on_reachable_grid", "reachable_signature", "reverse_plan"),
    "arc_jax.perturbation.shapes": ("ShapeMenu", "fit_shape_menu"),
    "arc_jax.perturbation.spaces": ("STANDARD_NAMES", "STOP_WORDS", "Space", "SpecError",
                                    "data_space", "parse_space", "standard_transformation"),
    "arc_jax.perturbation.transformations": ("Transformation", "custom",
                                             "register_transformation"),
})
