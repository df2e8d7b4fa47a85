"""Abstract domains by name: the registry behind ``arc-evaluate --domain NAME`` and the
``domain="NAME"`` argument of :func:`arc_jax.certify.certify` and :func:`arc_jax.verify.verify`.

Each entry (:class:`DomainEntry`) holds a name, one line of help, an optional settings block
(:class:`arc_jax.settings.Settings`, named like the domain) and a factory ``make(settings) ->
Domain`` that receives the parsed block (a ConfigDict; empty for a domain without settings).
Built in:

* ``interval`` (the default, :data:`DEFAULT`): the sound interval domain,
  :data:`arc_jax.interval.SOUND`, the domain of every reported certificate;
* ``linear_step``: :data:`arc_jax.linear_step.LINEAR_STEP`, intervals with a linear relaxation
  inside each LSTM step (tighter, slower; LSTMs and Bi-LSTMs only);
* ``point``: :data:`arc_jax.domains.point.POINT`, concrete values only (tests the seam; unsound
  for real sets, never for certificates).

A new domain is registered from its own module, touching no file here::

  register_domain("widened", "intervals widened by a factor", lambda s: Widened(s.factor),
                  Settings("widened", {"factor": Setting(2.0, "the widening factor")}))

Nothing here imports JAX: the factories import their domain modules when called, so
``arc-evaluate --help`` lists the domains without starting JAX.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Callable, Mapping

import ml_collections

from arc_jax.settings import Settings

if TYPE_CHECKING:
  from arc_jax.domain import Domain


@dataclasses.dataclass(frozen=True)
class DomainEntry:
  """A registered domain.

  Attributes:
    name: its name (``--domain NAME``; letters, digits and underscores).
    help: one line, listed by ``arc-evaluate --help``.
    make: ``make(settings) -> Domain``, given the parsed settings block (empty without one); the
      domain must be hashable (it is a static argument of jitted functions).
    settings: the domain's settings block (its fields, defaults and help), named ``name``; None
      for a domain without settings.
  """
  name: str
  help: str
  make: Callable[[ml_collections.ConfigDict], Domain]
  settings: Settings | None = None


DOMAINS: dict[str, DomainEntry] = {}
"""Every registered domain by name, in registration order."""

DEFAULT = "interval"
"""The domain of every certificate unless another is named."""


def register_domain(name: str, help: str, make: Callable[[ml_collections.ConfigDict], Domain],
                    settings: Settings | None = None) -> DomainEntry:
  """Registers a domain under ``name`` (see :class:`DomainEntry`) and returns its entry.

  Raises:
    ValueError: a name already registered or not an identifier, a help text of more than one
      line, or a settings block named otherwise than the domain.
  """
  if not name.isidentifier():
    raise ValueError(f"Domain name {name!r} is not an identifier (letters, digits, '_').")
  if name in DOMAINS:
    raise ValueError(f"A domain named {name!r} is already registered.")
  if not help or "\n" in help:
    raise ValueError(f"Domain {name!r}: give one line of help.")
  if settings is not None and settings.name != name:
    raise ValueError(f"Domain {name!r}: name its settings block {name!r}, not "
                     f"{settings.name!r}.")
  entry = DomainEntry(name, help, make, settings)
  DOMAINS[name] = entry
  return entry


def entry(name: str) -> DomainEntry:
  """The entry of ``name``.

  Raises:
    ValueError: an unknown name, listing the registered ones.
  """
  if name not in DOMAINS:
    raise ValueError(f"Unknown domain {name!r}; choose one of {sorted(DOMAINS)} (or register it "
                     "with arc_jax.domains.register_domain).")
  return DOMAINS[name]


def parse_settings(name: str, settings: Mapping[str, Any] | None = None
                   ) -> ml_collections.ConfigDict:
  """The settings block of domain ``name``: its defaults with ``settings`` (field → value)
  applied, each parsed as the field's type (:meth:`arc_jax.settings.Settings.parse`): text as
  ``--domain-setting FIELD=VALUE`` gives it, None for a bare boolean flag, or a value (read
  from its ``str``).

  Raises:
    ValueError: an unknown domain (listing the registered ones), a setting it does not have
      (listing its settings), or a value of the wrong type.
  """
  block = entry(name).settings
  settings = dict(settings or {})
  if block is None:
    if settings:
      raise ValueError(f"Domain {name!r} has no settings (got {sorted(settings)}).")
    return ml_collections.ConfigDict()
  # Values given as such are parsed from their text too (exact: repr of a float reads back).
  return block.parse({k: v if v is None or isinstance(v, str) else str(v)
                      for k, v in settings.items()})


def make_domain(name: str, settings: Mapping[str, Any] | None = None) -> Domain:
  """The domain registered as ``name``, made with its settings (:func:`parse_settings`).

  Raises:
    ValueError: an unknown domain (listing the registered ones), or an unknown or ill-typed
      setting (listing the domain's settings).
  """
  return entry(name).make(parse_settings(name, settings))


def resolve(domain: Domain | str) -> Domain:
  """``domain`` itself, or the domain registered under that name with its default settings."""
  return make_domain(domain) if isinstance(domain, str) else domain


def _interval(settings: ml_collections.ConfigDict) -> Domain:
  del settings
  from arc_jax.interval import SOUND  # pylint: disable=import-outside-toplevel  (no JAX here)
  return SOUND


def _linear_step(settings: ml_collections.ConfigDict) -> Domain:
  del settings
  from arc_jax.linear_step import LINEAR_STEP  # pylint: disable=import-outside-toplevel
  return LINEAR_STEP


def _point(settings: ml_collections.ConfigDict) -> Domain:
  del settings
  from arc_jax.domains.point import POINT  # pylint: disable=import-outside-toplevel
  return POINT


register_domain("interval", "sound intervals, rounded outward: proofs in floating point (default)",
                _interval)
register_domain("linear_step", "intervals with a linear relaxation inside each LSTM step: tighter, "
                "slower", _linear_step)
register_domain("point", "concrete values only: tests the domain seam; unsound for real sets",
                _point)
