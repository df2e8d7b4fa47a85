"""User transformations by name: ``register_transformation`` and ``config.plugins``, from a spec
string to the experiment's space (training and evaluation build it the same way)."""

import sys

import pytest
from tests.helpers.experiment_scripts import load_script

from arc_jax import custom, parse_space, register_transformation
from arc_jax.data import paths
from arc_jax.perturbation import transformations
from arc_jax.train import ConfigError, build_experiment, validate

PLUGIN = "tests.helpers.transformation_plugin"


@pytest.fixture(name="registry")
def fresh_registry(monkeypatch):
  """An empty registry for this test, and the plugin module imported afresh."""
  monkeypatch.setattr(transformations, "REGISTERED", {})
  monkeypatch.delitem(sys.modules, PLUGIN, raising=False)
  return transformations.REGISTERED


def swap(name="Swap"):
  return custom(name, 2, 2, match=lambda w: w[0] != w[1], replace=lambda w: [(w[1], w[0])])


def test_a_registered_transformation_is_a_name_in_every_spec_string(registry):
  with pytest.raises(ValueError, match=r"Unknown transformation 'Swap'\. Valid names: Del, "):
    parse_space("[(Swap,1)]")
  assert register_transformation("Swap", swap()) is registry["Swap"]
  space = parse_space("[(Swap,1),(Ins,1)]")
  assert set(space.enumerate(["a", "b", "c"])) >= {("b", "a", "c"), ("a", "c", "b"),
                                                   ("a", "a", "b", "c")}
  with pytest.raises(ValueError, match=r"Valid names: Del, .*Trans4, Swap\.$"):
    parse_space("[(Swop,1)]")


@pytest.mark.parametrize("name, transformation, message", [
    ("Ins", None, r"^register_transformation\('Ins', \.\.\.\): 'Ins' is the name of a standard "
                  r"transformation; register yours under another name \(e\.g\. 'MyIns'\)\.$"),
    ("Swap", swap(), r"^register_transformation\('Swap', \.\.\.\): 'Swap' is already "
                     r"registered; register yours under another name"),
    ("2Swap", swap("2Swap"), r"a spec string cannot hold the name '2Swap'"),
    ("Flip", swap(), r"expected a Transformation named 'Flip' \(arc_jax\.custom"),
])
def test_reserved_duplicate_and_malformed_names_are_refused(registry, name, transformation,
                                                             message):
  register_transformation("Swap", swap())
  with pytest.raises(ValueError, match=message):
    register_transformation(name, transformation or swap())
  assert list(registry) == ["Swap"]


def test_a_config_without_the_plugin_names_the_fix(registry):
  config = load_script("configs/arc").get_config()
  config.space = "[(TestSwap,1)]"
  with pytest.raises(ConfigError, match=r"config\.space='\[\(TestSwap,1\)\]': Unknown "
                     r"transformation 'TestSwap'"):
    validate(config)
  config.plugins = "no_such_plugin_module"
  with pytest.raises(ConfigError, match=r"^config\.plugins: cannot import 'no_such_plugin_module' "
                     r"\(.*\); install it or put its folder on PYTHONPATH\.$"):
    validate(config)


def test_config_plugins_bring_a_registered_transformation_into_the_experiment(registry):
  try:
    paths.find_data_file("sst2/train.tsv.gz")
  except paths.DataFileNotFoundError as missing:
    pytest.skip(f"real data not found: {missing}")
  config = load_script("configs/arc").get_config()
  config.num_train, config.num_dev, config.num_test = 32, 32, 32
  config.plugins = f" {PLUGIN} "
  config.space = "[(TestSwap,1),(Sub,1)]"
  validate(config)  # imports the plugin, which registers TestSwap
  assert list(registry) == ["TestSwap"]
  experiment = build_experiment(config)
  assert [t.name for t in experiment.space.transformations] == ["TestSwap", "Sub"]
  sentence = experiment.splits["test"].tokens[0]
  members = set(experiment.space.enumerate(sentence))
  swapped = {tuple(sentence[:i]) + (sentence[i + 1], sentence[i]) + tuple(sentence[i + 2:])
             for i in range(len(sentence) - 1) if sentence[i] != sentence[i + 1]}
  assert swapped and swapped <= members
