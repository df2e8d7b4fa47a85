"""The perturbation-space language: transformations, spaces, enumeration, counting, DP plans."""

from arc_jax.padding import LENGTH_BUCKETS, bucket
from arc_jax.perturbation.plans import (Plan, PlanBuilder, TransformationPlan, on_reachable_grid,
                                       reachable_signature, reverse_plan)
from arc_jax.perturbation.shapes import ShapeMenu, fit_shape_menu
from arc_jax.perturbation.spaces import STANDARD_NAMES, STOP_WORDS, Space, SpecError, data_space, parse_space, standard_transformation
from arc_jax.perturbation.transformations import Transformation, custom, register_transformation
