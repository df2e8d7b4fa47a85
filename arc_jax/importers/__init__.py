"""Importers: outside LSTM classifiers (PyTorch, Flax NNX / Linen, the original ARC checkpoints)
as arc_jax models, kept as model folders that ``arc-certify --model DIR`` certifies and
``arc_jax.load_run(DIR)`` loads.

Each framework module turns parameters into one framework-neutral
:class:`~arc_jax.importers.layout.Classifier`; :mod:`arc_jax.importers.layout` maps it onto
:class:`arc_jax.nn.LSTMClassifier` exactly and :mod:`arc_jax.importers.kept` writes the folder.
"""

from arc_jax.importers.arc import import_checkpoint
from arc_jax.importers.flax_lstm import import_params, read_params
from arc_jax.importers.kept import SOURCES, import_file, read_vocab, write_kept_model
from arc_jax.importers.layout import Affine, Cell, Classifier, ImporterError, arc_parameters
from arc_jax.importers.pytorch import import_state_dict, read_state_dict

__all__ = ["Affine", "Cell", "Classifier", "ImporterError", "SOURCES", "arc_parameters",
           "import_checkpoint", "import_file", "import_params", "import_state_dict",
           "read_params", "read_state_dict", "read_vocab", "write_kept_model"]
