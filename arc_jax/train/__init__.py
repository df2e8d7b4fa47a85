"""Training: configs, losses, curriculum schedules, jitted steps, checkpoints and the loop.

Entry point: :func:`train_and_evaluate` (``experiments/train.py`` is its command line). The
pieces are usable on their own: :func:`make_train_step` with :func:`arc_objective` is one ARC
training step for any model family, space and optimiser. ``config.model`` picks the model family
(:data:`FAMILIES`: LSTM / Bi-LSTM, or Tree-LSTM), a :class:`ModelFamily` of pure functions
(lower a batch, forward, certify, sample, attack, enumerate) over which the objectives and the
shared loop are written once.

The names below are imported on first use (:mod:`arc_jax._lazy`), so that reading a config
(:mod:`arc_jax.train.config`) starts no JAX.
"""

from arc_jax._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "arc_jax.train.checkpoints": ("Checkpoints", "RunDirectory", "RunExistsError",
                                  "RunNotFoundError"),
    "arc_jax.train.config": ("ConfigError", "default_config", "validate"),
    "arc_jax.train.experiment": ("Experiment", "build_experiment", "use_compilation_cache"),
    "arc_jax.train.losses": ("arc_loss", "cross_entropy", "max_of_means_loss", "weighted_mean",
                             "worst_case_loss"),
    "arc_jax.train.methods": ("METHODS", "Method", "register_method"),
    "arc_jax.parallel": ("batch_sharded", "data_mesh", "replicated"),
    "arc_jax.train.run": ("train_and_evaluate",),
    "arc_jax.train.schedules": ("epoch_ramp",),
    "arc_jax.train.steps": ("OPTIMIZERS", "RowMetrics", "TrainState", "evaluate_split",
                            "init_state", "make_eval_step", "make_optimizer", "make_train_step",
                            "zero_totals"),
    "arc_jax.train.families": ("FAMILIES", "ModelFamily", "register_family"),
    "arc_jax.train.objectives": ("arc_objective", "certify_rows", "classify_rows",
                                 "clean_objective"),
})
