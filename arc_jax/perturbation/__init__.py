"""The perturbation-space language: transformations, spaces, enumeration, counting, DP plans."""

from arc_jax.perturbation.plans import LENGTH_BUCKETS, Plan, PlanBuilder, TransformationPlan, bucket, reachable_signature, reverse_plan
from arc_jax.perturbation.spaces import STANDARD_NAMES, STOP_WORDS, Space, SpecError, parse_space, standard_transformation
from arc_jax.perturbation.transformations import Transformation, custom, register_transformation
