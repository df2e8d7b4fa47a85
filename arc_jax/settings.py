"""Settings blocks: the configuration an extension (a training method, a model family, a cell, an
abstract domain) declares beside its code.

An extension with settings declares one :class:`Settings`: a block name and, per field, its
default and one line of help. Training configs hold each registered block as a sub-config
(``config.<block>.<field>``, :func:`arc_jax.train.config.default_config`); ``arc-train --help``
lists them from the registries, and ``arc-evaluate --domain NAME --domain-setting FIELD=VALUE``
reads a domain's. Nothing here imports JAX.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterable, Mapping

import ml_collections
from ml_collections import config_dict

TRUE, FALSE = ("true", "t", "1", "yes"), ("false", "f", "0", "no")
"""The spellings of a boolean value (any case)."""
KINDS = {bool: "a bool (True or False)", int: "an int", float: "a float", str: "a string"}
"""The types of settings, in words."""


@dataclasses.dataclass(frozen=True)
class Setting:
  """One field of a block.

  Attributes:
    default: its value unless set.
    help: one line for --help.
    kind: its type, where the default is None.
    choices: ``() -> names``, the registry its value names (read when asked, so entries
      registered later count), or None; --help lists them and :meth:`Settings.check` refuses
      others.
    valid: ``(range in words, test)``, e.g. ``(">= 1", lambda v: v >= 1)``, or None.
  """

  default: Any
  help: str
  kind: type | None = None
  choices: Callable[[], Iterable[str]] | None = None
  valid: tuple[str, Callable[[Any], bool]] | None = None

  @property
  def value_type(self) -> type:
    return self.kind or type(self.default)

  def describe(self) -> str:
    """The help line, with the registered choices."""
    return self.help + (f"; one of: {', '.join(self.choices())}" if self.choices else "")


@dataclasses.dataclass(frozen=True)
class Settings:
  """A block of settings named ``name`` (the config key ``config.<name>``), field → Setting.

  Blocks compare by value, so two extensions that read the same settings (A3T and ARC-A3T) may
  declare the same block.
  """

  name: str
  fields: Mapping[str, Setting]

  def __post_init__(self):
    if not self.name.isidentifier():
      raise ValueError(f"Settings block name {self.name!r} is not a Python identifier.")
    for field, setting in self.fields.items():
      if not field.isidentifier():
        raise ValueError(f"Setting {self.name}.{field!r} is not a Python identifier.")
      if setting.default is None and setting.kind is None:
        raise ValueError(f"Setting {self.name}.{field} defaults to None: give its kind.")
    object.__setattr__(self, "fields", dict(self.fields))

  def __hash__(self):
    return hash((self.name, tuple(self.fields)))

  def check(self, block: Mapping[str, Any]) -> None:
    """Raises ValueError naming ``config.<name>.<field>``, its value and the fix for a value
    outside its choices or range (None passes the range)."""
    for field, setting in self.fields.items():
      value, where = block[field], f"config.{self.name}.{field}={block[field]!r}"
      if setting.choices is not None and value not in (names := list(setting.choices())):
        raise ValueError(f"{where} is unknown; choose one of {names}.")
      if setting.valid is not None and value is not None and not setting.valid[1](value):
        raise ValueError(f"{where} must be {setting.valid[0]}.")

  def defaults(self) -> ml_collections.ConfigDict:
    """The block's defaults as a ConfigDict (None defaults as typed placeholders)."""
    block = ml_collections.ConfigDict()
    for field, setting in self.fields.items():
      block[field] = (config_dict.placeholder(setting.kind) if setting.default is None
                      else setting.default)
    return block

  def parse(self, assignments: Mapping[str, str | None]) -> ml_collections.ConfigDict:
    """The defaults with ``assignments`` (field → value text, None for a bare boolean flag)
    applied, each parsed as its field's type.

    Raises:
      ValueError: an unknown field (naming the block's fields) or a value of the wrong type.
    """
    block = self.defaults()
    for field, text in assignments.items():
      if field not in self.fields:
        raise ValueError(f"{self.name} has no setting {field!r}; its settings: "
                         f"{sorted(self.fields) or 'none'}.")
      block[field] = parse_value(f"{self.name}.{field}", self.fields[field].value_type, text,
                                 self.fields[field].default)
    return block


def parse_value(field: str, kind: type, text: str | None, default: Any = None, *,
                name: str | None = None):
  """``text`` as a value of ``kind`` (bool, int, float or str); None is a bare flag, True for a
  bool.

  Raises:
    ValueError: naming ``field`` as given (``--config.seed``), the field (``name``, default
      ``field``), the type it takes and its default.
  """
  if kind is bool:
    if text is None or text.lower() in TRUE:
      return True
    if text.lower() in FALSE:
      return False
  elif text is None:
    raise ValueError(f"{field} needs a value: {field}=VALUE.")
  elif kind is str:
    return text
  else:
    try:
      return kind(text)
    except (TypeError, ValueError):
      pass
  raise ValueError(f"{field}={text}: {name or field} takes {KINDS.get(kind, kind.__name__)} "
                   f"(default {default!r}).")


def merged(blocks) -> dict[str, Settings]:
  """Block name → block of ``blocks`` (None entries skipped), refusing two different blocks
  under one name."""
  out: dict[str, Settings] = {}
  for block in blocks:
    if block is None:
      continue
    if block.name in out and out[block.name] != block:
      raise ValueError(f"Two different settings blocks are named {block.name!r}; rename one.")
    out[block.name] = block
  return out
