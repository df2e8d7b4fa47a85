"""Training: configs, losses, curriculum schedules, jitted steps, checkpoints and the loop.

Entry point: :func:`train_and_evaluate` (``experiments/train.py`` is its command line). The
pieces are usable on their own: :func:`make_train_step` with :func:`arc_objective` is one ARC
training step for any model, space and optimiser.
"""

from arc_jax.train.checkpoints import Checkpoints, RunDirectory, RunExistsError
from arc_jax.train.config import default_config, validate
from arc_jax.train.experiment import Experiment, build_experiment, use_compilation_cache
from arc_jax.train.losses import (arc_loss, cross_entropy, max_of_means_loss, weighted_mean,
                                  worst_case_loss)
from arc_jax.train.methods import METHODS, Method, register_method
from arc_jax.train.parallel import batch_sharded, data_mesh, replicated
from arc_jax.train.run import train_and_evaluate
from arc_jax.train.schedules import epoch_ramp
from arc_jax.train.steps import (TrainState, arc_objective, classify_and_certify, clean_objective,
                                 init_state, make_eval_step, make_optimizer, make_train_step,
                                 zero_totals)
