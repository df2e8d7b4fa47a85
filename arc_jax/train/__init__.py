"""Training: configs, losses, curriculum schedules, jitted steps, checkpoints and the loop.

Entry point: :func:`train_and_evaluate` (``experiments/train.py`` is its command line). The
pieces are usable on their own: :func:`make_train_step` with :func:`arc_objective` is one ARC
training step for any model family, space and optimiser. ``config.model`` picks the model family
(:data:`FAMILIES`: LSTM / Bi-LSTM, or Tree-LSTM), a :class:`ModelFamily` of pure functions
(lower a batch, forward, certify, sample, attack, enumerate) over which the objectives and the
shared loop are written once.
"""

from arc_jax.train.checkpoints import Checkpoints, RunDirectory, RunExistsError, RunNotFoundError
from arc_jax.train.config import ConfigError, default_config, validate
from arc_jax.train.experiment import Experiment, build_experiment, use_compilation_cache
from arc_jax.train.losses import (arc_loss, cross_entropy, max_of_means_loss, weighted_mean,
                                  worst_case_loss)
from arc_jax.train.methods import METHODS, Method, register_method
from arc_jax.parallel import batch_sharded, data_mesh, replicated
from arc_jax.train.run import train_and_evaluate
from arc_jax.train.schedules import epoch_ramp
from arc_jax.train.steps import (OPTIMIZERS, RowMetrics, TrainState, evaluate_split, init_state,
                                 make_eval_step, make_optimizer, make_train_step, zero_totals)
from arc_jax.train.families import FAMILIES, ModelFamily, register_family
from arc_jax.train.objectives import (arc_objective, certify_rows, classify_rows,
                                      clean_objective)
