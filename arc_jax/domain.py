"""The abstract-domain seam: the operations the layers and the DPs are written against.

The LSTM, Bi-LSTM, attention and Tree-LSTM cells (:mod:`arc_jax.nn`) and the certification DPs
(:mod:`arc_jax.certify`) compute on abstract values only through a :class:`Domain`, passed to them
as a static argument (hashable, so jitted code stays pure; default the sound interval domain,
:data:`arc_jax.interval.SOUND`). Each domain owns its transfer rules and their soundness
arguments; no code outside a domain reads the inside of its values, except at the boundary where
a certificate is made: :meth:`Domain.to_box` and :meth:`Domain.margin_lower_bounds`.

An abstract value is a pytree of arrays that all have the value's shape (``value.shape``,
``value.dtype``); the structural operations of the DPs (indexing, reshaping, padding, gathers and
concatenations along any axis) are applied leafwise with ``jax.tree.map`` or :func:`concatenate`
and :func:`split`, and are exact in every such domain. Plain arrays are concrete values in every
domain: each rule given only arrays computes the concrete operation (that is how the concrete
forward pass runs through the same layers).

Adding a domain: write one module with a class implementing this protocol (the rules and their
soundness arguments) and pass an instance as ``domain=`` to :func:`arc_jax.certify.certify_model`,
:func:`arc_jax.certify.make_certify_fn` or :func:`arc_jax.certify.tree_dp.certify_tree_model`;
to reach it by name (``domain="NAME"`` in :func:`arc_jax.certify.certify` and
:func:`arc_jax.verify.verify`, ``arc-evaluate --domain NAME``), register it from the same module
with :func:`arc_jax.domains.register_domain` (a name, one help line, a factory and, if it has
settings, an :class:`arc_jax.settings.Settings` block, read from ``--domain-setting
FIELD=VALUE``); ``arc-evaluate --plugins MODULE`` or a run's ``config.plugins`` imports it. No
shared file changes. The built-in names are ``interval`` (:data:`arc_jax.interval.SOUND`, the
default), ``linear_step`` and ``point`` (:mod:`arc_jax.domains.point`, concrete values only,
which ``tests/test_domains.py`` runs through every DP); ``tests/helpers/widened_domain.py``
registers a domain with a setting of its own.

One optional operation: a domain that defines
``lstm_step(carry, gates_in, recurrent, kernel, bias) -> (h', c')`` is handed each whole LSTM
step by :meth:`arc_jax.nn.cells.LSTMCell.step` (inputs and outputs are its own values; the
recurrent ``kernel`` and ``bias`` are W_hh and b_hh), so it can relate the gates through their
shared input. :class:`arc_jax.linear_step.LinearStepDomain` does, with a linear relaxation inside
the step and boxes between steps.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol, Sequence

import jax
import jax.numpy as jnp

Value = Any
"""An abstract value of some domain, or a plain (concrete) array."""


class Box(Protocol):
  """A box ``{x : lo <= x <= hi}``, what :meth:`Domain.to_box` returns. Declared here, not as
  :class:`arc_jax.interval.Interval` (which satisfies it), because :mod:`arc_jax.interval` imports
  this module (:func:`lstm_update_by_rules`)."""

  @property
  def lo(self) -> jax.Array: ...

  @property
  def hi(self) -> jax.Array: ...


class Domain(Protocol):
  """The operations of an abstract domain (shapes as in :mod:`arc_jax.interval`, which documents
  the soundness argument of each rule for intervals)."""

  def lift(self, x: jax.Array) -> Value:
    """The abstract value of the concrete array ``x``."""

  def to_box(self, x: Value) -> Box:
    """A box containing every concrete value of ``x`` (the boundary: what certificates report)."""

  exact_on_points: bool
  """Whether the rules map a point (:meth:`lift`) to the point the concrete operations compute.
  Only then do the certification DPs read x's own features off the unperturbed slot
  (:meth:`representative`); otherwise they run the concrete forward pass for them. A domain that
  rounds outward widens points, and the recurrence amplifies the widening along a sentence
  (interval wrapping): on a trained LSTM and a 36-word test sentence, the lower ends of the
  unperturbed slot's box gave logits 1.05 away from the concrete ones, a flipped prediction."""

  refines: Domain | None
  """A coarser domain whose certificate the certification DPs compute beside this domain's and
  intersect with it (:func:`arc_jax.certify.certificate.intersect`), so that this domain's bounds
  are never looser than that one's, in floating point too: the two compiled programs round the
  shared head differently, by about an ulp. None for a domain that refines none."""

  def representative(self, x: Value) -> jax.Array:
    """One concrete array of ``x``'s set (the clean features when ``x`` holds the clean input
    alone and :attr:`exact_on_points`)."""

  def top(self, like: Value) -> Value:
    """The value holding everything, of the shape and dtype of ``like``."""

  def linear(self, x: Value, kernel: jax.Array, bias: jax.Array | None = None) -> Value:
    """``x @ kernel + bias``."""

  def margin_lower_bounds(self, x: Value, kernel: jax.Array, bias: jax.Array) -> jax.Array:
    """Lower bounds (..., K, K) of z_y − z_j over z = x @ kernel + bias (the boundary)."""

  def monotone(self, fn: Callable[[jax.Array], jax.Array], x: Value) -> Value:
    """``fn(x)`` for a nondecreasing elementwise ``fn``."""

  def add(self, x: Value, y: Value) -> Value:
    """``x + y``."""

  def mul(self, x: Value, y: Value) -> Value:
    """Elementwise ``x * y``."""

  def mul_nonneg(self, x: Value, y: Value) -> Value:
    """Elementwise ``x * y`` for a non-negative ``x``."""

  def scale(self, x: Value, factor: jax.Array) -> Value:
    """``x * factor`` for a non-negative concrete ``factor``."""

  def divide(self, x: Value, divisor: jax.Array) -> Value:
    """``x / divisor`` for a positive concrete ``divisor``."""

  def join(self, x: Value, y: Value) -> Value:
    """A value containing both; the empty value ⊥ (:meth:`hull` of nothing) is neutral."""

  def where(self, condition: jax.Array, x: Value, y: Value) -> Value:
    """``x`` where ``condition`` holds, else ``y``."""

  def masked_join(self, x: Value, x_valid: jax.Array, y: Value, y_valid: jax.Array
                  ) -> tuple[Value, jax.Array]:
    """The join of two possibly empty (⊥) values given validity masks; (value, valid)."""

  def hull(self, values: Value, mask: jax.Array, axis: int, empty: Value | None = None
           ) -> Value:
    """A value containing the ``values`` whose ``mask`` is set, along ``axis``; ``empty`` where
    none is (None: the domain's empty value ⊥, neutral for :meth:`join`)."""

  def shrink_towards(self, box: Value, anchor: Value, eps: jax.Array | float) -> Value:
    """``anchor + eps · (box − anchor)``, containing ``box`` at ε = 1 (training curriculum)."""

  def softmax_weighted_sum(self, scores: Value, values: Value, mask: jax.Array) -> Value:
    """``Σ_p softmax(scores)_p · values_p`` over the positions where ``mask`` is set."""

  def lstm_update(self, gates_in: Value, recurrent: Value, c: Value) -> tuple[Value, Value]:
    """The LSTM cell after its affine maps: (h', c') from the gate pre-activations
    ``gates_in + recurrent`` (..., 4H) in the layout [i | f | o | g] and the cell state c (..., H).
    :func:`lstm_update_by_rules` composes it from the rules above; a domain may fuse it (the
    sound interval domain rounds once per step instead of once per operation)."""


def lift_input(domain: Domain, x: jax.Array) -> Value:
  """The concrete input ``x`` as an argument of ``domain``'s rules: ``x`` itself where the
  domain is :attr:`~Domain.exact_on_points` (its rules compute the concrete operations on a
  plain array, which is the point's image: an affine map then costs one product, not a centre
  and a radius product), else :meth:`~Domain.lift`."""
  return x if domain.exact_on_points else domain.lift(x)


def concatenate(values: Sequence[Value], axis: int = -1) -> Value:
  """Concatenation of abstract (or concrete) values along ``axis``, leafwise."""
  return jax.tree.map(lambda *a: jnp.concatenate(a, axis=axis), *values)


def split(x: Value, sections: int, axis: int = -1) -> list[Value]:
  """``jnp.split`` of an abstract (or concrete) value into equal ``sections`` along ``axis``:
  one ``split`` per leaf, whose transpose in the backward pass is one concatenation."""
  leaves, treedef = jax.tree.flatten(x)
  parts = [jnp.split(a, sections, axis=axis) for a in leaves]
  return [jax.tree.unflatten(treedef, [p[s] for p in parts]) for s in range(sections)]


def lstm_update_by_rules(domain: Domain, gates_in: Value, recurrent: Value, c: Value
                         ) -> tuple[Value, Value]:
  """:meth:`Domain.lstm_update` from the domain's rules: i, f, o = σ(·), g = tanh(·) of
  ``gates_in + recurrent``; c' = f·c + i·g; h' = o·tanh(c'). Sound because each rule is; the
  gates i, f, o are sigmoids, hence non-negative, so their products use ``mul_nonneg``."""
  d = domain
  i, f, o, g = split(d.add(gates_in, recurrent), 4)
  i, f, o = (d.monotone(jax.nn.sigmoid, v) for v in (i, f, o))
  g = d.monotone(jnp.tanh, g)
  c_new = d.add(d.mul_nonneg(f, c), d.mul_nonneg(i, g))
  return d.mul_nonneg(o, d.monotone(jnp.tanh, c_new)), c_new
