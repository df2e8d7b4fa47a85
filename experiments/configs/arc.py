"""``--config experiments/configs/arc.py[:ARG]``: the config of arc_jax/configs/arc.py."""

from arc_jax.configs.arc import *  # noqa: F401,F403
