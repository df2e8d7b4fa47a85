"""The rows of the paper's SST-2 LSTM tables (spaces, (model, space) pairs, one row's config),
shipped in arc_jax/configs/__init__.py with the configs that build them; not a config file."""

from arc_jax.configs import (PAPER_SPACES, SST2_ROWS, baseline_row_config,  # noqa: F401
                             sst2_row_config)
