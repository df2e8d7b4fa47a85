"""Issue 12: the escapes it reported stay fixed, and the certify API checks its inputs."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import arc_jax
from arc_jax.certify import api, certify, certify_jit
from arc_jax.certify.augmented import certify_split
from arc_jax.data.trees import from_nested
from arc_jax.linear_step import LINEAR_STEP
from arc_jax.nn import LSTMClassifier
from arc_jax.nn.tree_models import TreeLSTMClassifier
from arc_jax.perturbation import PlanBuilder, custom, on_reachable_grid, parse_space
from arc_jax.perturbation.split import split_space
from arc_jax.perturbation.trees import tree_space
from tests.helpers.certify_api import CERTIFY_MODEL, one_line, trace_at_most

WORDS = ("<pad>", "a", "the", "good", "bad", "movie")
VOCAB = {w: i for i, w in enumerate(WORDS)}


def bad_ins(name):
  return custom(name, 1, 2, match=lambda w: w[0] == "good", replace=lambda w: [(w[0], "bad")])


def test_escape_1_user_transformation_under_a_standard_name_is_refused():
  """Main accepted this space for trees, and the tree DP certified (good) although its member
  (good, bad) escaped the bounds: the DP read "Ins" as a duplication."""
  with pytest.raises(ValueError, match=r"'Ins' is the name of a standard transformation.*"
                                       r"another name"):
    parse_space("[(Ins,1)]", custom={"Ins": bad_ins("Ins")})


def test_escape_1_tree_spaces_decide_by_what_a_transformation_does():
  space = parse_space("[(MyIns,1)]", custom={"MyIns": bad_ins("MyIns")})
  with pytest.raises(ValueError, match="MyIns .1→2. has no tree counterpart: it rewrites a leaf "
                                       "into two other words"):
    tree_space(space)
  # A user 1→1 rewrite is a substitution, a user 1→0 a deletion, a repeat a duplication.
  swap = custom("Swap", 1, 1, match=lambda w: w[0] == "good", replace=lambda w: [("bad",)])
  drop = custom("Drop", 1, 0, match=lambda w: w[0] == "movie", replace=lambda w: [()])
  twice = custom("Twice", 1, 2, match=lambda w: w[0] == "good", replace=lambda w: [w * 2],
                 repeats_token=True)
  tspace = tree_space(parse_space("[(Swap,1),(Drop,1),(Twice,1)]",
                                  custom={"Swap": swap, "Drop": drop, "Twice": twice}))
  assert tspace.kinds == ("Sub", "Del", "Dup")
  assert set(tspace.enumerate(from_nested(("good", "movie")))) == {
      ("good", "movie"), ("bad", "movie"), "good", "bad", (("good", "good"), "movie"),
      ("good", "good")}


def test_standard_names_are_refused_for_every_user_transformation():
  for name in arc_jax.perturbation.STANDARD_NAMES:
    with pytest.raises(ValueError, match=f"'{name}' is the name of a standard transformation"):
      custom(name, 1, 1, match=lambda w: True, replace=lambda w: [w])


def small_model(**kw):
  rng = np.random.default_rng(0)
  return LSTMClassifier(rng.normal(size=(len(WORDS), 4)), hidden=3, projection=3, head_hidden=3,
                        rngs=nnx.Rngs(0), **kw)


@pytest.mark.parametrize("sentences,labels,pattern", [
    ([], [], "No sentences to certify"),
    ("a good movie", [0], "No sentences"),
    (["a good movie"], [0], r"Sentence 0 is str 'a good movie', not a sentence: pass .*split\(\)"),
    ([["good"]], [0, 1], r"labels has shape \(2,\).*one integer label per sentence \(1\)"),
    ([["good"]], [2], r"Label 2 of sentence 0 is outside 0..1"),
    ([["good"]], [-1], r"Label -1 of sentence 0"),
])
def test_certify_refuses_bad_inputs_in_one_line(sentences, labels, pattern):
  space = parse_space("[(Del,1)]")
  with one_line(pattern):
    certify(small_model(), space, sentences, labels, VOCAB)


def test_float64_parameters_without_x64_are_refused():
  with jax.enable_x64(False):
    with one_line(r"param_dtype=float64 needs JAX's 64-bit mode.*jax_enable_x64.*JAX_ENABLE_X64=1"):
      small_model(param_dtype=jnp.float64)
    with one_line("param_dtype=float64"):
      TreeLSTMClassifier(np.zeros((3, 4)), hidden=2, rngs=nnx.Rngs(0), param_dtype=jnp.float64)


def test_huge_grids_are_refused_with_size_and_memory_unless_allowed():
  space = parse_space("[(Del,50),(Sub,50)]", synonyms={"good": ["bad"]})
  with one_line(r"grid of 2601 slots \(51×51\).*about [\d.]+ GiB.*max_grid_slots=2601"):
    certify(small_model(), space, [["good"]], [0], VOCAB)
  with one_line("grid of 2601 slots"):
    certify(small_tree_model(), space, [from_nested("good")], [0], VOCAB)


def small_tree_model():
  return TreeLSTMClassifier(np.random.default_rng(0).normal(size=(len(WORDS), 4)), hidden=3,
                            num_classes=2, rngs=nnx.Rngs(0))


def test_certify_trees_in_one_call_refuses_bad_trees():
  model = small_tree_model()
  space = parse_space("[(Del,1),(Sub,1)]", synonyms={"good": ["bad", "oov-word"]})
  with one_line("No trees to certify"):
    certify(model, space, [], [], VOCAB)
  with one_line(r"Tree 0 is str 'good movie', not a tree"):
    certify(model, space, ["good movie"], [0], VOCAB)
  with one_line(r"Label -1 of tree 0 is outside 0..1"):  # no root label and none given
    certify(model, space, [from_nested(("good", "movie"))], None, VOCAB)
  out = certify(model, space, [from_nested(("good", "movie")), from_nested("bad")], [1, 0],
                VOCAB)
  assert out["certified"].shape == (2,) and out["margins"].shape == (2, 2)
  assert np.all(out["logits_lo"] <= out["clean_logits"])
  assert np.all(out["clean_logits"] <= out["logits_hi"])


def test_certify_reuses_its_compilation_across_calls(monkeypatch):
  """Batches of the same shape and reachable grid, from the same or a new same-shaped model,
  share one trace of certify_jit; a batch on a smaller grid is traced again."""
  model, space = small_model(), parse_space("[(Del,1),(Sub,1)]", synonyms={"good": ["bad"]})
  trace_at_most(monkeypatch, 1)
  certify(model, space, [["a", "good", "movie"]], [0], VOCAB, batch_size=4)
  certify(model, space, [["good", "movie"], ["the", "bad"]], [1, 0], VOCAB, batch_size=4)
  # A new, same-shaped model; its batch reaches both Del and Sub as the others do (the DP compiles
  # once per reachable grid, see reachable_signature).
  certify(small_model(), space, [["the", "good"]], [1], VOCAB, batch_size=4)
  chex.clear_trace_counter()
  monkeypatch.setattr(api, "certify_model", chex.assert_max_traces(CERTIFY_MODEL, n=0))
  with pytest.raises(AssertionError, match="traced > 0 times"):  # Sub only: a smaller grid
    certify(small_model(), space, [["good"]], [1], VOCAB, batch_size=4)


def test_certify_bounds_its_compiled_shapes_with_the_same_certificates(monkeypatch):
  """certify(max_dp_shapes=1) runs every batch on one (width, grid) shape, tracing once,
  with the certificates of the exact grids (0: one shape per length bucket and grid)."""
  model = small_model()
  space = parse_space("[(Del,2),(Sub,1)]", synonyms={"good": ["bad"], "movie": ["good"]})
  sentences = [["good"], ["the", "movie"], ["a", "good", "movie", "a", "bad", "movie"],
               ["bad"] * 9, ["a", "the", "good"]]
  labels = [0, 1, 1, 0, 1]
  exact = certify(model, space, sentences, labels, VOCAB, batch_size=1, max_dp_shapes=0)
  trace_at_most(monkeypatch, 1)
  bounded = certify(model, space, sentences, labels, VOCAB, batch_size=1, max_dp_shapes=1)
  np.testing.assert_array_equal(bounded["certified"], exact["certified"])
  for key in ("margins", "logits_lo", "logits_hi", "clean_logits"):
    np.testing.assert_allclose(bounded[key], exact[key], rtol=1e-5, atol=1e-6)


def test_a_plan_marked_for_another_space_is_refused():
  """A plan's reachable budgets (on_reachable_grid) name one budget per transformation of its
  space; under a space with other transformations they would cut the wrong grid."""
  model = LSTMClassifier(np.zeros((len(WORDS), 3), np.float32), hidden=2, projection=2,
                         head_hidden=2, rngs=nnx.Rngs(0))
  graphdef, state = nnx.split(model)
  space = parse_space("[(Del,1)]")
  plan = on_reachable_grid(space, PlanBuilder(space, VOCAB).build([["the", "movie"]]))
  other = parse_space("[(Del,1),(Sub,1)]", synonyms={"good": ["bad"]})
  with pytest.raises(ValueError, match=r"reachable budgets \(1,\) are not of the space"):
    certify_jit(graphdef, other.signature, state, plan, jnp.zeros((1,), jnp.int32))


def test_a_vocabulary_id_beyond_the_embedding_table_is_refused_or_certifies_nothing():
  """Issue 40: the gather clamped an id beyond the table, so a certificate was about another
  word. certify() refuses such a vocabulary; a lowered plan holding such an id gets NaN bounds,
  which certify nothing."""
  model, space = small_model(), parse_space("[(Del,1)]")
  vocab = dict(VOCAB, great=len(WORDS))
  with one_line(rf"maps 'great' to id {len(WORDS)}, outside the model's embedding table of "
                rf"{len(WORDS)} rows.*the vocabulary the model was built with"):
    certify(model, space, [["a", "great", "movie"]], [0], vocab)
  graphdef, state = nnx.split(model)
  plan = PlanBuilder(space, vocab).build([["a", "great", "movie"], ["a", "good", "movie"]], 2)
  labels = jnp.zeros((2,), jnp.int32)
  for label in (0, 1):  # one of the two labels is certified for the clamped word's sentence
    cert = certify_jit(graphdef, space.signature, state, plan, labels.at[0].set(label))
    assert not bool(cert.certified[0]) and np.all(np.isnan(cert.logits.lo[0]))
    assert np.all(np.isfinite(cert.logits.lo[1]))


def test_a_space_given_as_a_string_is_refused_in_one_line():
  model = small_model()
  with one_line(r"space is the string '\[\(Del,1\)\]', not a parsed space: pass "
                r"arc_jax.perturbation.parse_space"):
    certify(model, "[(Del,1)]", [["a", "good", "movie"]], [0], VOCAB)
  with one_line("space is the string"):
    certify(small_tree_model(), "[(Del,1)]", [from_nested(("good", "movie"))], [0], VOCAB)
  with one_line("space is the string"):
    arc_jax.certify.make_certify_fn(nnx.graphdef(model), "[(Del,1)]")


def test_float64_state_without_x64_is_refused_by_certify_and_certify_fn():
  """Issue 40: float64 parameters that reach certification (a merged float64 state, as a
  loader may give) were computed in float32 without a word."""
  model = small_model()
  graphdef, state = nnx.split(model)
  state64 = jax.tree.map(lambda a: np.asarray(a, np.float64), state)
  space = parse_space("[(Del,1)]")
  plan = PlanBuilder(space, VOCAB).build([["a", "good", "movie"]], 1)
  with jax.enable_x64(False):
    with one_line(r"float64 parameters, but JAX's 64-bit mode is off.*jax_enable_x64"):
      certify(nnx.merge(graphdef, state64), space, [["a", "good", "movie"]], [0], VOCAB)
    certify_fn = arc_jax.certify.make_certify_fn(graphdef, space)
    with one_line("float64 parameters"):
      certify_fn(state64, plan, jnp.zeros((1,), jnp.int32))
    cert = certify_fn(state, plan, jnp.zeros((1,), jnp.int32))  # float32 is certified
    assert cert.margins.dtype == jnp.float32


def test_a_domain_or_model_a_path_has_no_rules_for_is_refused_in_one_line():
  """Every DP dispatches on every option: the tree DP has no linear-step rule (it computed plain
  intervals under that name), certify_split no Tree-LSTM abstraction."""
  model = small_tree_model()
  with one_line(r"Tree-LSTM DP has rules for the interval domains only \(arc_jax.interval.SOUND, "
                r"arc_jax.interval.UNROUNDED\), not LinearStepDomain: certify trees with "
                r"domain=arc_jax.interval.SOUND"):
    certify(model, parse_space("[(Del,1)]"), [from_nested(("good", "movie"))], [0], VOCAB,
            domain=LINEAR_STEP)
  split = split_space(parse_space("[(Del,1),(Sub,1)]", synonyms={"good": ["bad"]}), "Sub")
  with one_line("certify_split certifies LSTMs and Bi-LSTMs, not TreeLSTMClassifier"):
    certify_split(model, split, [["good", "movie"]], [0], VOCAB)
  with one_line("split is str .*not a split space"):
    certify_split(small_model(), "[(Sub,1)]", [["good", "movie"]], [0], VOCAB)
