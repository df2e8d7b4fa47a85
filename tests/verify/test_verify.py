"""The complete verifier: exact splits of S(x), DP soundness on sub-spaces, and verify == EX.

* The split partitions application choices: against enumeration, the children's choices are
  pairwise disjoint and their union is the parent's (and so are the strings), at every level of
  random split paths; ``count`` equals the number of choices.
* The DP bounds every member of a sub-space (lowered with ``match``, ``replacement_mask`` and
  ``keep``), for LSTMs and Bi-LSTMs with large weights.
* ``verify`` equals exhaustive enumeration example by example on small random models, with no
  unknowns, for every window rule, LSTMs and Bi-LSTMs of every pooling.
* ``verify`` has certify's shape: a model (the deprecated ``(graphdef, state)`` still works,
  with a DeprecationWarning), the same keyword options, certify's certificates of S(x) in its
  result, and one-line errors for what it does not cover (Tree-LSTMs).
"""

import dataclasses
import functools
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from hypothesis import HealthCheck, given, settings, strategies as st

from arc_jax.attacks import Journal, exhaustive_robustness
from arc_jax.certify import certify
from arc_jax.data.trees import from_nested
from arc_jax.linear_step import LINEAR_STEP
from arc_jax.nn import predict
from arc_jax.nn.tree_models import TreeLSTMClassifier
from arc_jax.perturbation import PlanBuilder, parse_space
from arc_jax.verify import WINDOW_RULES, verify
from arc_jax.verify import subspaces as sub, verifier
from tests.helpers.certify_api import one_line
from tests.helpers.lstm_models import SWAP, VOCAB, certify_batch, concrete_logits, make_model


@pytest.fixture(autouse=True, scope="module")
def float64():
  with jax.enable_x64(True):
    yield


SYNONYMS = {"good": ["best", "movie"], "movie": ["film", "films"], "film": ["movie"],
            "it": ["this"], "x": ["y", "x"]}
SPECS = ["[(Del,2),(Sub,2)]", "[(Ins,2),(Sub,2)]", "[(Del,1),(Ins,1),(Sub,1)]",
         "[(Sub,2),(Trans3,1),(Swap,1)]", "[(Trans1,1),(Trans4,2),(Del,1)]"]
SMALL_WORDS = ["a", "the", "good", "movie", "film", "it", "is", "x", "!", "one", "of", "most"]


def space_of(spec):
  return parse_space(spec, synonyms=SYNONYMS, custom={"Swap": SWAP}).restricted_to(VOCAB)


sentences = st.lists(st.sampled_from(SMALL_WORDS), min_size=1, max_size=7).map(tuple)


def random_path(space, tokens, picks):
  """Nodes along a random split path: each split's children, then descend into one of them."""
  node = sub.full(space, tokens)
  for pick in picks:
    windows = sub.splittable(space, node)
    if not windows:
      return
    i, k = windows[pick % len(windows)]
    children = sub.split(space, node, i, k, blocks=1 + pick % 3)
    yield node, children
    node = children[pick % len(children)]


@settings(max_examples=150, deadline=None)
@given(sentences, st.sampled_from(SPECS), st.lists(st.integers(0, 50), max_size=5))
def test_split_partitions_the_choices(tokens, spec, picks):
  space = space_of(spec)
  root = sub.full(space, tokens)
  assert set(sub.members(space, tokens, root)) == set(space.enumerate(tokens))
  assert sub.count(space, root) == space.count(tokens)
  for parent, children in random_path(space, tokens, picks):
    parent_choices = list(sub.choices(space, parent))
    assert len(set(parent_choices)) == len(parent_choices) == sub.count(space, parent)
    child_choices = [set(sub.choices(space, c)) for c in children]
    assert sum(len(c) for c in child_choices) == len(parent_choices)  # pairwise disjoint
    assert set().union(*child_choices) == set(parent_choices)
    assert [sub.count(space, c) for c in children] == [len(c) for c in child_choices]
    assert (set().union(*(set(sub.members(space, tokens, c)) for c in children))
            == set(sub.members(space, tokens, parent)))


@settings(max_examples=40, deadline=None)
@given(sentences, st.sampled_from(SPECS), st.lists(st.integers(0, 50), max_size=3),
       st.integers(0, 2**31))
def test_samples_are_uniform_over_the_choices(tokens, spec, picks, seed):
  """Each string comes up as often as the choices that write it (within 5 sigma); an empty
  node gives none."""
  space = space_of(spec)
  nodes = [sub.full(space, tokens)] + [c for _, cs in random_path(space, tokens, picks) for c in cs]
  node = nodes[-1]
  size = sub.count(space, node)
  draws = sub.samples(space, tokens, node, np.random.default_rng(seed), 200 * min(size, 20))
  if size == 0:
    assert draws == []
    return
  writes = {}
  for picks_ in sub.choices(space, node):
    s = sub.write(tokens, picks_, space)
    writes[s] = writes.get(s, 0) + 1
  assert set(draws) <= set(writes)
  for s, ways in writes.items():
    p = ways / size
    sigma = np.sqrt(p * (1 - p) / len(draws))
    assert abs(draws.count(s) / len(draws) - p) <= 5 * sigma + 1e-12


def test_split_refuses_a_forced_window():
  space = space_of("[(Sub,2)]")
  node = sub.split(space, sub.full(space, ("good", "movie")), 0, 0)[1]
  with pytest.raises(ValueError, match="cannot be split"):
    sub.split(space, node, 0, 0)


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(sentences, st.sampled_from(SPECS[:3]), st.lists(st.integers(0, 50), min_size=1,
                                                        max_size=4),
       st.integers(0, 3), st.booleans(), st.sampled_from([1.0, 4.0]))
def test_dp_bounds_every_member_of_a_subspace(tokens, spec, picks, seed, bidirectional, scale):
  space = space_of(spec)
  nodes = [c for _, children in random_path(space, tokens, picks) for c in children][-4:]
  if not nodes:
    nodes = [sub.full(space, tokens)]
  base = PlanBuilder(space, VOCAB, min_replacement_slots=4).build([tokens])
  plan = sub.lower(base, space, VOCAB, nodes, rows=4)
  model = make_model(seed, 3, scale, bidirectional)
  cert = certify_batch(model, space, plan, jnp.zeros((4,), jnp.int32))
  for b, node in enumerate(nodes):
    strings = list(sub.members(space, tokens, node))
    if not strings:
      continue
    logits = concrete_logits(model, strings)
    assert np.all(np.asarray(cert.logits.lo[b]) - 1e-9 <= logits)
    assert np.all(logits <= np.asarray(cert.logits.hi[b]) + 1e-9)


def check_verify_equals_enumeration(seed, spec, window_rule, bidirectional, blocks=1,
                                    pooling="final", cell="lstm", **stages):
  space = space_of(spec)
  rng = np.random.default_rng(seed)
  sents = [tuple(rng.choice(SMALL_WORDS, size=rng.integers(1, 8))) for _ in range(8)]
  model = make_model(seed, 3, 4.0, bidirectional, pooling=pooling, cell=cell)
  labels = concrete_logits(model, sents).argmax(-1)
  labels[0] = 1 - labels[0]  # one wrong clean prediction
  graphdef, state = nnx.split(model)
  # By default no attacks and almost no enumeration: the search itself must find every answer.
  stages = {"enumerate_below": 1, "beam": 0, "samples": 0, **stages}
  result = verify(model, space, sents, labels, VOCAB, window_rule=window_rule, blocks=blocks,
                  batch_size=4, min_replacement_slots=4, seed=seed, **stages)
  ex = exhaustive_robustness(functools.partial(predict, graphdef, state), space, sents, labels,
                             VOCAB, shortcut=False, batch_size=64)
  assert result.summary()["unknowns"] == 0
  np.testing.assert_array_equal(result.robust, ex.robust)
  assert np.all(result.robust[result.certificates.certified])  # CF ⇒ exact
  for v, s, y in zip(result.verdicts, sents, labels):
    if v.status == "not robust":  # a concrete member of S(x), misclassified
      assert v.counterexample in set(space.enumerate(s))
      assert concrete_logits(model, [v.counterexample])[0].argmax() != y
  return result


@functools.cache
def interval_verification(window_rule):
  """The interval verifier's checked result on one case, computed once per test process."""
  return check_verify_equals_enumeration(1, SPECS[0], window_rule, False)


@pytest.mark.parametrize("window_rule", WINDOW_RULES)
def test_verify_equals_enumeration(window_rule):
  result = interval_verification(window_rule)
  assert result.summary()["by_stage"].get("robust/search", 0) > 0  # the search proved some


def test_verify_in_the_linear_step_domain_equals_enumeration():
  """The verifier with the tighter domain (every certification by the linear-step DP): the same
  answers, from no more sub-spaces than with intervals."""
  intervals = interval_verification("last")
  tighter = check_verify_equals_enumeration(1, SPECS[0], "last", False, domain=LINEAR_STEP)
  assert tighter.summary()["nodes_certified"] <= intervals.summary()["nodes_certified"]


def test_verify_with_every_stage_equals_enumeration():
  result = check_verify_equals_enumeration(2, SPECS[1], "balanced", True, enumerate_below=16,
                                           beam=2, samples=4)
  stages = result.summary()["by_stage"]
  assert stages.get("robust/enumerated", 0) + stages.get("not robust/enumerated", 0) > 0


@pytest.mark.parametrize("tie", [0.0, np.inf])
def test_verify_with_its_default_stages_equals_enumeration(monkeypatch, tie):
  """The defaults enumerate these small spaces with prefix-shared logits (mean pooling); with
  no tie margin every decision is theirs, with an infinite one every decision is predict's."""
  monkeypatch.setattr(verifier, "TIE", tie)
  result = check_verify_equals_enumeration(4, SPECS[0], "last", False, pooling="mean",
                                           enumerate_below=8192, beam=5, samples=32)
  assert result.summary()["by_stage"].get("robust/enumerated", 0) > 0


@pytest.mark.parametrize("pooling,bidirectional", [
    ("mean", False), ("attention", True),
    pytest.param("mean", True, marks=pytest.mark.slow),
    pytest.param("attention", False, marks=pytest.mark.slow)])
def test_verify_equals_enumeration_for_every_pooling(pooling, bidirectional):
  check_verify_equals_enumeration(3, SPECS[0], "last", bidirectional, pooling=pooling)


def test_verify_equals_enumeration_for_another_recurrent_cell():
  """verify runs the DP and the concrete pass of the model's own cell: a Bi-GRU with attention."""
  check_verify_equals_enumeration(3, SPECS[0], "last", True, pooling="attention", cell="gru")


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("spec", SPECS[:3])
def test_verify_equals_enumeration_more(seed, spec):
  check_verify_equals_enumeration(seed, spec, WINDOW_RULES[seed % 3], seed % 2 == 1,
                                  blocks=1 + seed % 2)


def test_a_stopped_verification_resumes_from_its_journal(tmp_path, monkeypatch):
  """Verdicts are journaled as they are reached: a verification killed in its search resumes
  with the verdicts it had and gives the answers of one that never stopped; another key starts
  the journal over."""
  space = space_of(SPECS[0])
  rng = np.random.default_rng(5)
  sents = [tuple(rng.choice(SMALL_WORDS, size=rng.integers(2, 8))) for _ in range(6)]
  model = make_model(5, 3, 4.0, False)
  labels = concrete_logits(model, sents).argmax(-1)
  options = dict(batch_size=4, min_replacement_slots=4, enumerate_below=1, beam=0, samples=0)
  whole = verify(model, space, sents, labels, VOCAB, **options)
  searched = [i for i, v in enumerate(whole.verdicts) if v.stage == "search"]
  assert len(searched) >= 2
  path = tmp_path / "verify.progress.jsonl"
  search, calls = verifier._search, []

  def stopping_search(*args, **kwargs):
    if len(calls) == 1:
      raise KeyboardInterrupt  # killed during the second search
    calls.append(1)
    return search(*args, **kwargs)

  monkeypatch.setattr(verifier, "_search", stopping_search)
  with pytest.raises(KeyboardInterrupt):
    verify(model, space, sents, labels, VOCAB, journal=Journal(path, {"model": "m"}), **options)
  monkeypatch.setattr(verifier, "_search", search)
  kept = len(path.read_text().splitlines()) - 1
  assert kept == len(sents) - len(searched) + 1
  resumed = verify(model, space, sents, labels, VOCAB, journal=Journal(path, {"model": "m"}),
                   **options)
  assert [v.status for v in resumed.verdicts] == [v.status for v in whole.verdicts]
  first = resumed.verdicts[searched[0]]  # read back, field by field
  assert dataclasses.replace(first, seconds=0.0) == dataclasses.replace(whole.verdicts[searched[0]],
                                                                        seconds=0.0)
  assert resumed.seconds >= first.seconds > 0  # the earlier part's time is counted
  other = verify(model, space, sents, labels, VOCAB, journal=Journal(path, {"model": "other"}),
                 **options)
  assert [v.status for v in other.verdicts] == [v.status for v in whole.verdicts]
  assert json.loads(path.read_text().splitlines()[0])["model"] == "other"


def test_verify_rejects_an_unknown_rule():
  model = make_model(0, 3, 1.0, False)
  with pytest.raises(ValueError, match="window_rule"):
    verify(model, space_of(SPECS[0]), [("a",)], [0], VOCAB, window_rule="middle")


def test_verify_holds_certify_s_certificates_and_takes_the_old_form_with_a_warning():
  """``verify(model, ...)`` returns, besides its verdicts, the certificates ``certify`` gives
  (Bi-LSTM with attention pooling); ``verify(graphdef, state, ..., rows=)`` gives the same
  answers with a DeprecationWarning naming the new form."""
  space = space_of(SPECS[1])
  model = make_model(4, 3, 2.0, True, pooling="attention")
  sents = [("good", "movie"), ("it", "is", "x", "!"), ("a",)]
  labels = concrete_logits(model, sents).argmax(-1)
  result = verify(model, space, sents, labels, VOCAB, batch_size=4, enumerate_below=4)
  cert = certify(model, space, sents, labels, VOCAB, batch_size=4)
  assert list(result.certificates) == list(cert)
  np.testing.assert_array_equal(result.certificates.certified, cert.certified)
  for key in ("margins", "logits_lo", "logits_hi", "clean_logits"):
    np.testing.assert_allclose(result.certificates[key], cert[key], rtol=1e-12, atol=1e-12)
  with pytest.warns(DeprecationWarning) as caught:
    old = verify(*nnx.split(model), space, sents, labels, VOCAB, rows=4, enumerate_below=4)
  assert sorted(str(w.message).split(" is deprecated")[0] for w in caught) == [
      "verify(..., rows=)", "verify(graphdef, state, space, ...)"]
  assert all("use verify(model, space, ...)" in str(w.message) or "use verify(..., batch_size=)"
             in str(w.message) for w in caught)
  assert [v.status for v in old.verdicts] == [v.status for v in result.verdicts]


def test_verify_refuses_what_it_does_not_cover_in_one_line():
  tree_model = TreeLSTMClassifier(np.zeros((len(VOCAB), 4)), hidden=2, rngs=nnx.Rngs(0))
  with one_line("Tree-LSTMs are not supported by verify .*certify trees with "
                r"arc_jax.certify.certify\(model, space, trees, labels, vocab\)"):
    verify(tree_model, space_of(SPECS[0]), [from_nested(("a", "x"))], [0], VOCAB)
  with one_line("verify decides LSTMClassifier models"):
    verify(object(), space_of(SPECS[0]), [("a",)], [0], VOCAB)
  model = make_model(0, 3, 1.0, False)
  with one_line(r"labels has shape \(2,\)"):
    verify(model, space_of(SPECS[0]), [("a",)], [0, 1], VOCAB)
  with one_line("grid of 9 slots"):
    verify(model, space_of(SPECS[0]), [("a",)], [0], VOCAB, max_grid_slots=4)
  with one_line("space is the string"):
    verify(model, SPECS[0], [("a",)], [0], VOCAB)


@pytest.mark.parametrize("bidirectional", [False, True])
def test_dp_is_exact_on_a_one_member_subspace(bidirectional):
  """Forcing every window (keep False) leaves one string: its box is a point, so the DP honours
  ``keep`` (x itself would widen it) and the masks (any other replacement would)."""
  space = space_of("[(Sub,2),(Ins,1)]")
  tokens = ("it", "good", "x")
  node = sub.full(space, tokens)
  for i, k in [(0, 0), (1, 1), (2, 0)]:
    node = sub.split(space, node, i, k, blocks=8)[1]
  assert sub.splittable(space, node) == []
  (member,) = sub.members(space, tokens, node)
  base = PlanBuilder(space, VOCAB, min_replacement_slots=4).build([tokens])
  model = make_model(0, 3, 4.0, bidirectional)
  cert = certify_batch(model, space, sub.lower(base, space, VOCAB, [node], rows=4),
                       jnp.zeros((4,), jnp.int32))
  np.testing.assert_allclose(cert.logits.lo[0], concrete_logits(model, [member])[0], atol=1e-9)
  np.testing.assert_allclose(cert.logits.hi[0], cert.logits.lo[0], atol=1e-9)
