"""The recurrent-cell seam: what a cell gives the classifier and the DPs, and the one scan of a
cell over a padded batch.

A cell (:class:`RecurrentCell`) carries a tuple of ``carry_size`` values, each (..., H), whose
first is the output state h. It splits its step into an input affine map
(:meth:`RecurrentCell.input_gates`, batched by the DPs over every position and replacement
outside their scans), a recurrent affine map of h (:meth:`RecurrentCell.recurrent`, shared by
every branch of a DP step that reads the same source) and the rest
(:meth:`RecurrentCell.step`). The LSTM (:class:`arc_jax.nn.cells.LSTMCell`, carry (h, c)) and
the GRU (:class:`arc_jax.nn.gru.GRUCell`, carry (h,)) are the registered cells (:data:`CELLS`);
a new cell is one module that calls :func:`register_cell`, with the DPs' soundness tests run on
it.

The memoizing DPs (:mod:`arc_jax.certify.lstm_dp`, :mod:`arc_jax.certify.attention_dp`) step
cells through this interface only, so a cell's step is sound in a domain exactly when it composes
that domain's sound rules (or a domain's own rule for the whole step).
"""

from __future__ import annotations

from typing import Callable, Protocol

import jax
import jax.numpy as jnp

from arc_jax import interval as iv
from arc_jax.domain import Domain
from arc_jax.settings import Settings

Value = iv.Value
Carry = tuple
"""A cell's carry: a tuple of ``carry_size`` values (..., H), the output state h first."""


class RecurrentCell(Protocol):
  """A recurrent cell of the sequence classifiers (module docstring)."""

  hidden: int
  carry_size: int

  def input_gates(self, x: Value, domain: Domain = iv.SOUND) -> Value:
    """The input's affine map (..., in) → (..., G)."""

  def recurrent(self, h: Value, domain: Domain = iv.SOUND) -> Value:
    """The state's affine map (..., H) → (..., G); a box's image is computed row by row, so
    slicing it afterwards gives the image of the slice."""

  def step(self, carry: Carry, gates_in: Value, recurrent: Value | None = None,
           domain: Domain = iv.SOUND) -> Carry:
    """The next carry from ``carry`` and the input's gates (..., G); ``recurrent`` is
    :meth:`recurrent` of ``carry[0]`` when the caller has it already."""


CELLS: dict[str, Callable[..., RecurrentCell]] = {}
"""Cell name → constructor ``(in_features, hidden, *, rngs, param_dtype, **settings)``."""

CELL_SETTINGS: dict[str, Settings] = {}
"""Cell name → its settings block (``config.<block>``; cells without settings are absent)."""


def register_cell(name: str, settings: Settings | None = None):
  """Class decorator: registers a cell under ``name`` (``LSTMClassifier(cell=name)``); a cell
  with ``settings`` takes each of its fields as a keyword argument (the sequence family passes
  ``config.<settings.name>``)."""
  def register(cls):
    if name in CELLS:
      raise ValueError(f"A cell named {name!r} is registered already ({CELLS[name].__name__}).")
    CELLS[name] = cls
    if settings is not None:
      CELL_SETTINGS[name] = settings
    return cls
  return register


def make_cell(name: str, in_features: int, hidden: int, settings: dict | None = None,
              **kwargs) -> RecurrentCell:
  """The registered cell ``name`` with its ``settings`` (field → value); a ValueError naming
  the registered ones otherwise."""
  if name not in CELLS:
    raise ValueError(f"Unknown cell {name!r}; choose one of {sorted(CELLS)}.")
  return CELLS[name](in_features, hidden, **(settings or {}), **kwargs)


def initial_carry(cell: RecurrentCell, zeros: Value) -> Carry:
  """The zero carry: ``zeros`` (..., H) for each of the cell's carried values."""
  return (zeros,) * cell.carry_size


def run(cell: RecurrentCell, gates: Value, lengths: jax.Array, domain: Domain = iv.SOUND
        ) -> tuple[Value, Value, Value]:
  """Runs ``cell`` over input gates (B, N, G) of padded sentences of ``lengths`` (B,): the final
  state (B, H), the sum of the states over each sentence's positions (B, H) and the state at
  every position (B, N, H), what :meth:`~arc_jax.nn.models.LSTMClassifier.pool` pools.

  Plain arrays give the concrete forward pass; abstract values of ``domain`` (A3T's interval
  abstraction) give values containing it, since each step is the cell's sound step on values
  containing every concrete input and state. Padded positions keep the carry and add nothing.
  """
  batch, n_pad = lengths.shape[0], jax.tree.leaves(gates)[0].shape[1]
  zeros = jnp.zeros((batch, cell.hidden), jax.tree.leaves(gates)[0].dtype)
  zeros = zeros if isinstance(gates, jax.Array) else domain.lift(zeros)
  time_major = lambda a: jnp.swapaxes(a, 0, 1)
  real = time_major(jnp.arange(n_pad)[None, :] < lengths[:, None])[..., None]

  def body(state, inputs):
    carry, total = state
    g, r = inputs
    new = cell.step(carry, g, domain=domain)
    carry = tuple(domain.where(r, a, b) for a, b in zip(new, carry))
    return (carry, domain.where(r, domain.add(total, carry[0]), total)), carry[0]

  ((carry, total), states) = jax.lax.scan(
      body, (initial_carry(cell, zeros), zeros), (jax.tree.map(time_major, gates), real))
  return carry[0], total, jax.tree.map(time_major, states)
