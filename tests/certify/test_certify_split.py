"""certify_split has certify's shape: a model, the same keyword options and a CertifyResult, on
the DP shapes certify uses.

* Members of different lengths and examples share compiled programs: with ``max_dp_shapes=1``
  the DP is traced once (chex.assert_max_traces), with the certificates of the exact shapes.
* Every field is sound against enumeration of S(x): the logit box holds the logits of every
  string, the margins bound every string's, the clean logits are x's, for LSTMs, Bi-LSTMs with
  attention pooling and the linear-step domain (soundness over every family and abstraction,
  margins only, is in test_float_soundness.py and tests/perturbation/test_split_space.py).
* Options with no rules are one-line errors.
"""

import jax
import numpy as np
import pytest

from arc_jax.certify import CertifyResult, certify, certify_split
from arc_jax.linear_step import LINEAR_STEP
from arc_jax.perturbation import PlanBuilder, parse_space
from arc_jax.perturbation.split import split_space
from tests.helpers.certify_api import one_line, trace_at_most
from tests.helpers.lstm_models import VOCAB, concrete_logits, make_model

TOL = 1e-9


@pytest.fixture(autouse=True, scope="module")
def float64():
  with jax.enable_x64(True):
    yield


SPACE = parse_space("[(Ins,1),(Del,1),(Sub,2)]",
                    synonyms={"good": ["best", "movie"], "movie": ["film"], "x": ["y"]})
SENTENCES = [("x",), ("the", "good", "movie"), ("a", "film", "is", "good", "x"),
             ("it", "is", "one", "of", "the", "most", "good", "movie")]


def labels_of(model, sentences):
  return concrete_logits(model, sentences).argmax(-1)


def assert_sound_on_all_of_the_space(out, model, space, sentences, labels):
  for b, x in enumerate(sentences):
    logits = concrete_logits(model, list(space.enumerate(x)))
    assert np.all(out.logits_lo[b] - TOL <= logits) and np.all(logits <= out.logits_hi[b] + TOL)
    assert np.all(out.margins[b] <= logits[:, labels[b]:labels[b] + 1] - logits + TOL)
    np.testing.assert_allclose(out.clean_logits[b], concrete_logits(model, [x])[0], atol=1e-9)
    assert out.certified[b] == np.all(np.delete(out.margins[b], labels[b]) > 0)


def test_members_of_different_lengths_share_one_compiled_shape(monkeypatch):
  space = SPACE.restricted_to(VOCAB)
  split = split_space(space, "Sub")
  members = [m.tokens for x in SENTENCES for m in split.members(x)]
  builder = PlanBuilder(split.abstract, VOCAB)
  assert len({builder.exact_shape(m) for m in members}) > 2  # widths 4, 8, 12 and grids
  model = make_model(3, 3, 2.0, False)
  labels = labels_of(model, SENTENCES)
  exact = certify_split(model, split, SENTENCES, labels, VOCAB, batch_size=4, max_dp_shapes=0)
  trace_at_most(monkeypatch, 1)
  bounded = certify_split(model, split, SENTENCES, labels, VOCAB, batch_size=4,
                          max_dp_shapes=1)
  assert isinstance(bounded, CertifyResult) and list(bounded) == list(exact) == [
      "certified", "margins", "logits_lo", "logits_hi", "clean_logits", "members"]
  np.testing.assert_array_equal(bounded.certified, exact.certified)
  np.testing.assert_array_equal(bounded.members, [len(split.members(x)) for x in SENTENCES])
  for key in ("margins", "logits_lo", "logits_hi", "clean_logits"):
    np.testing.assert_allclose(bounded[key], exact[key], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("abstracted,pooling,bidirectional,abstraction,domain", [
    ("Sub", "final", False, "dp", None),
    ("Del,Sub", "attention", True, "dp", None),
    ("Ins", "final", True, "dp", LINEAR_STEP),
    ("Sub", "attention", True, "interval", None),
])
def test_every_field_is_sound_on_all_of_the_space(abstracted, pooling, bidirectional,
                                                  abstraction, domain):
  space = SPACE.restricted_to(VOCAB)
  model = make_model(5, 3, 3.0, bidirectional, pooling=pooling)
  labels = labels_of(model, SENTENCES)
  options = {} if domain is None else {"domain": domain}
  out = certify_split(model, split_space(space, abstracted), SENTENCES, labels, VOCAB,
                      abstraction=abstraction, batch_size=8, **options)
  assert_sound_on_all_of_the_space(out, model, space, SENTENCES, labels)


def test_everything_abstracted_is_certify():
  """With no augmented transformation the one member is x and its restricted space is S(x):
  certify_split's certificates are certify's (same shapes, same programs)."""
  space = SPACE.restricted_to(VOCAB)
  model = make_model(2, 3, 2.0, True, pooling="attention")
  labels = labels_of(model, SENTENCES)
  whole = certify(model, space, SENTENCES, labels, VOCAB, batch_size=4)
  split = certify_split(model, split_space(space, "Ins,Del,Sub"), SENTENCES, labels, VOCAB,
                        batch_size=4)
  for key in whole:
    np.testing.assert_array_equal(split[key], whole[key])
  np.testing.assert_array_equal(split.members, 1)


def test_options_without_rules_are_refused_in_one_line():
  space = SPACE.restricted_to(VOCAB)
  model = make_model(0, 3, 1.0, False)
  split = split_space(space, "Sub")
  with one_line(r"Unknown abstraction 'box'; choose one of \['dp', 'interval'\]"):
    certify_split(model, split, SENTENCES, [0] * 4, VOCAB, abstraction="box")
  with one_line("interval abstraction has rules for the interval domains only .*not "
                "LinearStepDomain: pass abstraction='dp'"):
    certify_split(model, split, SENTENCES, [0] * 4, VOCAB, abstraction="interval",
                  domain=LINEAR_STEP)
  with one_line("1→1"):
    certify_split(model, split_space(space, "Ins"), SENTENCES, [0] * 4, VOCAB,
                  abstraction="interval")
  with one_line(r"labels has shape \(1,\)"):
    certify_split(model, split, SENTENCES, [0], VOCAB)
  with one_line("grid of 3 slots.*max_grid_slots=3"):
    certify_split(model, split, SENTENCES, [0] * 4, VOCAB, max_grid_slots=2)
  with one_line("space is the split space .*certify it with arc_jax.certify.certify_split"):
    certify(model, split, SENTENCES, [0] * 4, VOCAB)
