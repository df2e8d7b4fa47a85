"""What the training methods need of a built config, as a protocol: the methods
(:mod:`arc_jax.train.methods`, :mod:`arc_jax.train.augmented`) are registered by the config schema
(:mod:`arc_jax.train.config`), which the builder (:mod:`arc_jax.train.experiment`) imports, so
they cannot name :class:`~arc_jax.train.experiment.Experiment` without closing an import circle.
``Experiment`` satisfies :class:`Built` structurally."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence

if TYPE_CHECKING:
  import ml_collections
  import numpy as np
  from flax import nnx
  from jax.sharding import Mesh

  from arc_jax.data import ExperimentData, TextSplit, Tree
  from arc_jax.perturbation import Space
  from arc_jax.perturbation.trees import TreeSpace
  from arc_jax.train.families.base import ModelFamily


class Built(Protocol):
  """A config, built (:class:`arc_jax.train.experiment.Experiment`): the parts a training method
  reads (read-only, as on the frozen dataclass)."""

  @property
  def config(self) -> ml_collections.ConfigDict: ...

  @property
  def family(self) -> ModelFamily: ...

  @property
  def data(self) -> ExperimentData: ...

  @property
  def splits(self) -> dict[str, TextSplit | list[Tree]]: ...

  @property
  def space(self) -> Space | TreeSpace: ...

  @property
  def graphdef(self) -> nnx.GraphDef: ...

  @property
  def rest(self) -> nnx.State: ...

  @property
  def mesh(self) -> Mesh: ...

  def doubled(self, batch: Any, partners: Callable[[list, np.ndarray], Sequence]) -> Any:
    """A training batch of B rows as 2B rows: its examples, then one partner per example."""
    ...
