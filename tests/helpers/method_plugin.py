"""A user module that registers a training method with a settings block of its own when imported,
as ``config.plugins`` names one (tests/cli/test_cli.py): the clean objective, with a ``weight``
that its check bounds, so the setting visibly reaches the method."""

from arc_jax.settings import Setting, Settings
from arc_jax.train import methods

SETTINGS = Settings("toy_method", {"weight": Setting(1.0, "the toy method's weight")})


def check(config) -> None:
  if config.toy_method.weight > 2:
    raise ValueError(f"weight {config.toy_method.weight} is above 2; set "
                     "--config.toy_method.weight to at most 2.")


if "toy" not in methods.METHODS:
  methods.register_method("toy", methods.Method(methods.clean, check=check, settings=SETTINGS))
