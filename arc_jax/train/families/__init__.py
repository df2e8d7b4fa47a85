"""Model families: ``config.model`` → the :class:`ModelFamily` that trains and evaluates it.

``"lstm"`` (:data:`SEQUENCE`): LSTM and Bi-LSTM on SST-2 and IMDB; ``"tree_lstm"``
(:data:`TREE`): Tree-LSTM on the SST trees. See :mod:`arc_jax.train.families.base`.
"""

from arc_jax.train.families.base import Lowering, ModelFamily, ModelFunctions, Placed, Searches
from arc_jax.train.families.cnn import CNN
from arc_jax.train.families.sequence import SEQUENCE, make_predict_fn
from arc_jax.train.families.tree import TREE, IndexedTrees

FAMILIES: dict[str, ModelFamily] = {family.name: family for family in (SEQUENCE, TREE, CNN)}
"""``config.model`` → its family."""


def register_family(family: ModelFamily) -> None:
  """Makes ``config.model = family.name`` train and evaluate ``family``."""
  if family.name in FAMILIES:
    raise ValueError(f"A model family named {family.name!r} is already registered.")
  FAMILIES[family.name] = family
