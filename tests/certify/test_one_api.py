"""Issue 44, one API shape: certify, certify_split and verify take the model, the examples, the
labels and the vocabulary in that order and the same keyword options, give their certificates as
a CertifyResult, and are exported from arc_jax (on first use: ``import arc_jax`` starts no JAX)
and from arc_jax.certify. Their behaviour against enumeration is tested beside each
(test_certify*.py, test_certify_split.py, tests/verify/test_verify.py)."""

import dataclasses
import inspect
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from arc_jax.certify import CertifyResult, api, augmented
from arc_jax.verify import verifier

REPO = Path(__file__).resolve().parents[2]
ENTRY_POINTS = {"certify (sentences)": api.certify_sentences, "certify (trees)": api.certify_trees,
                "certify_split": augmented.certify_split, "verify": verifier.verify}


def keywords(fn):
  return {name for name, p in inspect.signature(fn).parameters.items()
          if p.kind is p.KEYWORD_ONLY}


@pytest.mark.parametrize("name", ENTRY_POINTS)
def test_the_entry_points_take_the_same_arguments(name):
  fn = ENTRY_POINTS[name]
  positional = list(inspect.signature(fn).parameters)[:5]
  assert positional[0] == "model" and positional[3:] == ["labels", "vocab"], positional
  assert {"batch_size", "domain", "max_grid_slots"} <= keywords(fn)
  if fn in (api.certify_sentences, augmented.certify_split):
    assert {"eps", "max_dp_shapes"} <= keywords(fn)
  returns = inspect.signature(fn).return_annotation
  assert returns == ("VerifyResult" if name == "verify" else "CertifyResult")


def test_a_certify_result_is_also_the_mapping_certify_returned():
  rows = lambda *shape: np.zeros((2, *shape))
  out = CertifyResult(np.array([True, False]), rows(3), rows(3), rows(3), rows(3))
  assert list(out) == ["certified", "margins", "logits_lo", "logits_hi", "clean_logits"]
  assert out["certified"] is out.certified and len(out) == 5 and "members" not in out
  assert set(dict(out)) == set(out.keys())
  with pytest.raises(KeyError):
    out["members"]  # pylint: disable=pointless-statement
  split = dataclasses.replace(out, members=np.array([3, 1]))
  assert list(split)[-1] == "members" and split["members"] is split.members
  with pytest.raises(dataclasses.FrozenInstanceError):
    out.certified = None


def test_the_entry_points_are_exported_from_arc_jax_on_first_use():
  code = textwrap.dedent("""
      import sys
      import arc_jax
      assert "jax" not in sys.modules, "import arc_jax imported JAX"
      assert {"certify", "certify_split", "split_space", "verify", "CertifyResult"} <= set(
          arc_jax.__all__) <= set(dir(arc_jax))
      package = arc_jax.certify  # the package, imported now, callable as its certify
      import arc_jax.certify
      from arc_jax.certify import CertifyResult, certify, certify_split
      assert package is sys.modules["arc_jax.certify"] and callable(package)
      assert arc_jax.certify_split is certify_split and arc_jax.CertifyResult is CertifyResult
      assert arc_jax.split_space is sys.modules["arc_jax.perturbation.split"].split_space
      try:
        arc_jax.certify(object(), None, [], [], {})  # dispatched by certify on the model's type
      except ValueError as error:
        assert "No certification is registered for object" in str(error)
      else:
        raise AssertionError("arc_jax.certify(...) did not call certify")
      from arc_jax.verify import verify
      assert callable(arc_jax.verify) and arc_jax.certify.verify is verify
      print("ok")
      """)
  done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                        cwd=REPO, timeout=300, check=False)
  assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]
