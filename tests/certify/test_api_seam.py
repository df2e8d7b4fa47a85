"""Issue 42: the certify entry points dispatch on the model's type through their registries, and
arc_jax/certify/api.py knows no model kind: each kind's certification is a module that registers
itself (certify/sequence.py, certify/trees.py; the CNN's in train/families/cnn.py)."""

import ast
import pathlib

import arc_jax
from arc_jax.certify import api, sequence, trees
from arc_jax.nn.models import LSTMClassifier
from arc_jax.nn.tree_models import TreeLSTMClassifier

API = pathlib.Path(arc_jax.__file__).parent / "certify" / "api.py"
MODEL_KINDS = {"arc_jax.nn.models", "arc_jax.nn.tree_models", "arc_jax.certify.lstm_dp",
               "arc_jax.certify.tree_dp", "arc_jax.certify.attention_dp"}


def imported_modules(path: pathlib.Path) -> set[str]:
  """Every module an import of ``path`` names (top level, in functions, under TYPE_CHECKING),
  with ``from package import module`` as ``package.module`` too."""
  names = set()
  for node in ast.walk(ast.parse(path.read_text(), str(path))):
    if isinstance(node, ast.Import):
      names.update(alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ""
      if node.level:  # relative: from the package arc_jax.certify
        base = ".".join(["arc_jax", "certify"][:3 - node.level] + ([base] if base else []))
      names.add(base)
      names.update(f"{base}.{alias.name}" for alias in node.names)
  return names


def test_api_imports_no_model_kind():
  imports = imported_modules(API)
  assert not imports & MODEL_KINDS, sorted(imports & MODEL_KINDS)
  # nor the kinds' own modules, which import it to register
  assert not imports & {"arc_jax.certify.sequence", "arc_jax.certify.trees",
                        "arc_jax.certify.augmented"}, sorted(imports)
  assert "importlib" not in imports  # no import by a string either


def test_the_kinds_register_themselves():
  for entry_point in (api.certify_model, api.certify):
    assert {LSTMClassifier, TreeLSTMClassifier} <= set(entry_point.registry)
  assert api.certify.dispatch(LSTMClassifier) is sequence.certify_sentences
  assert api.certify.dispatch(TreeLSTMClassifier) is trees.certify_trees
  assert api.certify_model.dispatch(LSTMClassifier) is sequence.certify_sequence_model


def test_the_names_that_moved_are_still_read_from_api():
  for name in ("certify_sentences", "certification_order", "certificate_from_features",
               "certify_sequence_model", "FEATURES_DP", "features_dp", "reachable_signature"):
    assert getattr(api, name) is getattr(sequence, name), name
  assert api.certify_trees is trees.certify_trees
  from arc_jax.certify.api import certification_order  # pylint: disable=import-outside-toplevel
  assert certification_order is sequence.certification_order
  assert arc_jax.certify.certification_order is sequence.certification_order
