"""Loads the scripts of experiments/ (not a package) as modules, for the tests that run them."""

import importlib.util
import sys
from pathlib import Path

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


def load_script(name: str):
  """``experiments/<name>.py`` as a module, e.g. ``"evaluate"`` or ``"configs/arc"``."""
  # A name of its own: "configs/tree" must not shadow the `tree` package in sys.modules.
  module_name = "experiment_script_" + name.replace("/", "_")
  spec = importlib.util.spec_from_file_location(module_name, EXPERIMENTS / f"{name}.py")
  module = importlib.util.module_from_spec(spec)
  sys.modules[spec.name] = module  # dataclasses look their module up while it executes
  spec.loader.exec_module(module)
  return module
