"""EX accuracy: agreement with brute force, early exit, the certificate shortcut, audit mode,
CF ≤ EX ≤ Acc with real certificates, and a bounded number of predictor compilations."""

import functools
import json

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from arc_jax.attacks import Journal, exhaustive_robustness, exhaustive_tree_robustness
from arc_jax.certify import certify
from arc_jax.data.trees import from_nested
from arc_jax.nn import LSTMClassifier, predict
from arc_jax.perturbation import PlanBuilder, bucket, parse_space
from arc_jax.perturbation.trees import TreeBatchBuilder, tree_space

WORDS = ["<pad>", "a", "the", "good", "fine", "great", "bad", "movie", "film", "is", "not", "fun"]
VOCAB = {w: i for i, w in enumerate(WORDS)}
SYNONYMS = {"good": ["fine", "great", "bad"], "movie": ["film"], "film": ["movie"],
            "fun": ["good", "outside-vocab"]}
SPACE = parse_space("[(Del,1),(Ins,1),(Sub,2)]", synonyms=SYNONYMS)
BAD = VOCAB["bad"]


def make_model(seed, weight_scale=1.0):
  """A random classifier, its last bias shifted so that it predicts both classes equally often."""
  rng = np.random.default_rng(seed)
  model = LSTMClassifier(rng.normal(size=(len(WORDS), 4)), hidden=4, projection=4, head_hidden=4,
                         dropout_rate=0.0, rngs=nnx.Rngs(seed))
  graphdef, state = nnx.split(model)
  model = nnx.merge(graphdef, jax.tree.map(lambda p: p * weight_scale, state))
  pool = PlanBuilder(parse_space("[]"), VOCAB).build(random_sentences(rng, 64))
  logits = np.asarray(model(pool.token_ids, pool.lengths))
  shift = np.median(logits[:, 1] - logits[:, 0])
  model.head_out.bias[...] = model.head_out.bias[...].at[1].add(-shift)
  return model


def predictor(model):
  return functools.partial(predict, *nnx.split(model))


@jax.jit
def keyword_logits(token_ids, lengths):
  """Class 1 iff the sentence contains "bad": a model whose errors the tests can place."""
  real = jnp.arange(token_ids.shape[1])[None, :] < lengths[:, None]
  has_bad = jnp.any((token_ids == BAD) & real, axis=1)
  return jnp.stack([~has_bad, has_bad], axis=1).astype(jnp.float32)


class RowCounter:
  """Wraps a predictor and counts the non-padding rows it classifies (members have length > 0)."""

  def __init__(self, predict_logits):
    self.predict_logits = predict_logits
    self.rows = 0
    self.calls = 0

  def __call__(self, token_ids, lengths):
    self.rows += int(np.count_nonzero(lengths))
    self.calls += 1
    return self.predict_logits(token_ids, lengths)


def brute_force_predictions(predict_logits, strings, rows=64):
  """Predicted class of each string, classified independently of the engine's batching."""
  builder = PlanBuilder(parse_space("[]"), VOCAB)
  out = []
  for start in range(0, len(strings), rows):
    plan = builder.build(strings[start:start + rows], batch_size=rows)
    logits = np.asarray(predict_logits(plan.token_ids, plan.lengths))
    out.extend(np.argmax(logits, axis=1)[:len(strings[start:start + rows])])
  return np.asarray(out)


def brute_force_robust(predict_logits, space, sentences, labels):
  space = space.restricted_to(VOCAB)
  robust = []
  for x, y in zip(sentences, labels):
    members = list(space.enumerate(x))
    robust.append(bool(np.all(brute_force_predictions(predict_logits, members) == y)))
  return np.asarray(robust)


def random_sentences(rng, count, max_len=6):
  return [tuple(rng.choice(WORDS[1:], size=rng.integers(1, max_len + 1))) for _ in range(count)]


@pytest.mark.parametrize("seed, batch_size", [(0, 1), (1, 5), (2, 32)])
def test_matches_brute_force(seed, batch_size):
  rng = np.random.default_rng(seed)
  model = make_model(seed)
  predict_logits = predictor(model)
  sentences = random_sentences(rng, 24)
  clean = brute_force_predictions(predict_logits, sentences)
  # Mostly correct labels, so that robustness (not just accuracy) decides most examples.
  labels = np.where(rng.random(len(sentences)) < 0.8, clean, 1 - clean)

  result = exhaustive_robustness(predict_logits, SPACE, sentences, labels, VOCAB,
                                 batch_size=batch_size)

  expected = brute_force_robust(predict_logits, SPACE, sentences, labels)
  np.testing.assert_array_equal(result.correct, clean == labels)
  np.testing.assert_array_equal(result.robust, expected)
  # Non-trivial: robust, correct-but-attackable and wrong examples all occur.
  assert expected.any() and (~expected & (clean == labels)).any() and (clean != labels).any()
  space = SPACE.restricted_to(VOCAB)
  for i in np.flatnonzero(~result.robust):
    member = result.counterexamples[i]
    assert member in set(space.enumerate(sentences[i]))
    assert brute_force_predictions(predict_logits, [member])[0] != labels[i]
  for i in np.flatnonzero(result.robust):
    assert result.members_evaluated[i] == len(list(space.enumerate(sentences[i])))
    assert result.counterexamples[i] is None


def test_early_exit_stops_enumerating():
  space = parse_space("[(Sub,2)]", synonyms=SYNONYMS)
  attacked = ("good",) * 6  # "bad" is a synonym of "good": some members are misclassified
  members = list(space.enumerate(attacked))
  first_bad = next(j for j, m in enumerate(members) if "bad" in m)
  batch_size = 4
  assert first_bad + 2 * batch_size < len(members)
  counter = RowCounter(keyword_logits)

  result = exhaustive_robustness(counter, space, [attacked], [0], VOCAB, batch_size=batch_size)

  assert not result.robust[0] and "bad" in result.counterexamples[0]
  assert counter.rows == result.members_evaluated[0]
  # The slack: the batch holding the first misclassified member, and the one in flight after it.
  assert first_bad < counter.rows <= first_bad + 2 * batch_size
  assert counter.rows < len(members)


def test_early_exit_is_per_example_in_packed_batches():
  space = parse_space("[(Sub,2)]", synonyms=SYNONYMS)
  sentences = [("good",) * 6, ("film", "movie"), ("movie",), ("a", "film"),
               ("movie", "is", "fun", "film"), ("good",) * 5, ("film",)]
  sizes = np.asarray([len(list(space.restricted_to(VOCAB).enumerate(s))) for s in sentences])
  attacked = np.asarray([True, False, False, False, False, True, False])
  counter = RowCounter(keyword_logits)

  result = exhaustive_robustness(counter, space, sentences, [0] * len(sentences), VOCAB,
                                 batch_size=16)

  np.testing.assert_array_equal(result.robust, ~attacked)
  assert counter.rows == result.members_evaluated.sum()
  np.testing.assert_array_equal(result.members_evaluated[~attacked], sizes[~attacked])
  assert np.all(result.members_evaluated[attacked] < sizes[attacked])
  # Small spaces share batches: fewer predictor calls than examples.
  assert counter.calls < len(sentences)


def test_wrong_clean_prediction_costs_one_row():
  space = parse_space("[(Sub,2)]", synonyms=SYNONYMS)
  sentences = [("bad", "good", "good", "good"), ("film", "movie"), ("good", "bad")]
  counter = RowCounter(keyword_logits)

  result = exhaustive_robustness(counter, space, sentences, [0, 0, 0], VOCAB, batch_size=2)

  assert result.correct.tolist() == [False, True, False]
  assert result.enumerated.tolist() == [False, True, False]
  assert result.members_evaluated.tolist() == [1, len(list(space.enumerate(sentences[1]))), 1]
  assert result.counterexamples[0] == sentences[0]
  assert counter.rows == result.members_evaluated.sum()
  # Even when its members could fill the rest of the clean sentence's batch.
  alone = exhaustive_robustness(keyword_logits, space, sentences[:1], [0], VOCAB, batch_size=8)
  assert alone.members_evaluated.tolist() == [1]


def test_shortcut_trusts_certificates_and_audit_mode_checks_them():
  space = parse_space("[(Sub,2)]", synonyms=SYNONYMS)
  sentences = [("good",) * 4, ("film", "movie")]
  robust_size = len(list(space.enumerate(sentences[1])))
  # Deliberately wrong certificate: example 0 has misclassified members.
  certified = [True, False]

  counter = RowCounter(keyword_logits)
  trusted = exhaustive_robustness(counter, space, sentences, [0, 0], VOCAB, certified=certified,
                                  batch_size=4)
  assert trusted.robust.tolist() == [True, True]
  assert trusted.members_evaluated.tolist() == [1, robust_size]
  assert counter.rows == 1 + robust_size
  assert trusted.audit_failures == ()
  assert trusted.enumerated.tolist() == [False, True]

  audit = exhaustive_robustness(keyword_logits, space, sentences, [0, 0], VOCAB,
                                certified=certified, shortcut=False, batch_size=4)
  assert audit.robust.tolist() == [False, True]
  (failure,) = audit.audit_failures
  assert (failure.index, failure.sentence, failure.label, failure.predicted) == (
      0, sentences[0], 0, 1)
  assert "bad" in failure.member and failure.member in set(space.enumerate(sentences[0]))
  summary = json.loads(json.dumps(audit.summary()))
  assert summary["audit_failures"] == [failure.to_json()]
  assert summary["num_certified"] == 1 and summary["num_robust"] == 1
  assert not np.all(audit.certified <= audit.robust)  # the inclusion audits exist to check


def test_certified_example_with_wrong_clean_prediction_is_an_audit_failure():
  space = parse_space("[(Sub,1)]", synonyms=SYNONYMS)
  result = exhaustive_robustness(keyword_logits, space, [("a", "bad", "movie")], [0], VOCAB,
                                 certified=[True], batch_size=4)
  assert not result.correct[0] and not result.robust[0]
  (failure,) = result.audit_failures
  assert failure.member == ("a", "bad", "movie") and failure.predicted == 1


def test_certified_le_exhaustive_le_accuracy_with_real_certificates():
  rng = np.random.default_rng(7)
  model = make_model(7, weight_scale=2.0)
  predict_logits = predictor(model)
  space = parse_space("[(Del,1),(Sub,1)]", synonyms=SYNONYMS)
  sentences = random_sentences(rng, 16, max_len=5)
  clean = brute_force_predictions(predict_logits, sentences)
  labels = np.where(np.arange(len(sentences)) % 4 == 0, 1 - clean, clean)
  certified = certify(model, space, sentences, labels, VOCAB, batch_size=16)["certified"]

  trusted = exhaustive_robustness(predict_logits, space, sentences, labels, VOCAB,
                                  certified=certified, batch_size=16)
  audit = exhaustive_robustness(predict_logits, space, sentences, labels, VOCAB,
                                certified=certified, shortcut=False, batch_size=16)

  assert trusted.audit_failures == () and audit.audit_failures == ()
  for result in (trusted, audit):
    assert result.certified_accuracy <= result.exhaustive_accuracy <= result.accuracy
    assert np.all(result.robust <= result.correct) and np.all(result.certified <= result.robust)
  np.testing.assert_array_equal(trusted.robust, audit.robust)
  assert trusted.members_evaluated.sum() < audit.members_evaluated.sum()
  assert 0 < certified.sum() < audit.robust.sum() < audit.correct.sum()


def test_compiles_once_per_length_bucket():
  """Enumeration calls the jitted model on full batches of 16 rows, traced at most once per
  length bucket of the members (chex.assert_max_traces), not once per sentence."""
  model = make_model(3)
  graphdef, state = nnx.split(model)
  rng = np.random.default_rng(3)
  space = parse_space("[(Ins,2),(Del,1)]")
  sentences = [tuple(rng.choice(WORDS[1:], size=n)) for n in range(1, 21)] * 2
  labels = rng.integers(0, 2, size=len(sentences))
  widths = {bucket(max(len(m), 1)) for s in sentences for m in space.enumerate(s)}
  assert len(widths) < len(sentences)
  chex.clear_trace_counter()

  @jax.jit
  @chex.assert_max_traces(n=len(widths))
  def counted(token_ids, lengths):
    chex.assert_shape(token_ids, (16, None))  # checked at each trace
    return nnx.merge(graphdef, state)(token_ids, lengths)

  exhaustive_robustness(counted, space, sentences, labels, VOCAB, batch_size=16)


def test_summary_counts_and_empty_input(capsys):
  result = exhaustive_robustness(keyword_logits, SPACE, [], [], VOCAB)
  summary = json.loads(json.dumps(result.summary()))
  assert summary["num_examples"] == 0 and summary["exhaustive_accuracy"] == 0.0

  result = exhaustive_robustness(keyword_logits, parse_space("[(Del,1)]"), [("a",), ("bad",)],
                                 [0, 0], VOCAB, batch_size=2, progress=True)
  assert "2/2" in capsys.readouterr().err
  assert result.members_evaluated.tolist() == [2, 1]  # ("a",) and the empty string; ("bad",)
  assert result.summary()["members_evaluated"] == 3


def test_invalid_inputs_name_the_problem():
  with pytest.raises(ValueError, match="labels"):
    exhaustive_robustness(keyword_logits, SPACE, [("a",)], [0, 1], VOCAB)
  with pytest.raises(ValueError, match="certified"):
    exhaustive_robustness(keyword_logits, SPACE, [("a",)], [0], VOCAB, certified=[True, False])
  with pytest.raises(KeyError, match="Sentence 1 .*'zebra'"):
    exhaustive_robustness(keyword_logits, SPACE, [("a",), ("zebra",)], [0, 0], VOCAB)
  with pytest.raises(ValueError, match="batch_size"):
    exhaustive_robustness(keyword_logits, SPACE, [("a",)], [0], VOCAB, batch_size=0)


def test_space_is_restricted_to_the_vocabulary():
  # "fun" → "outside-vocab" would not be classifiable: only in-vocabulary members are tried.
  counter = RowCounter(keyword_logits)
  result = exhaustive_robustness(counter, parse_space("[(Sub,1)]", synonyms=SYNONYMS),
                                 [("fun",)], [0], VOCAB, batch_size=4)
  assert result.robust[0] and result.members_evaluated[0] == 2 and counter.rows == 2


def keyword_root_logits(batch):
  """Class 1 iff the tree has a "bad" leaf (padding ids are 0): the tree keyword model."""
  has_bad = np.any(batch.token_ids == BAD, axis=1)
  return np.stack([~has_bad, has_bad], axis=1).astype(np.float32)


def test_trees_agree_with_brute_force_and_audit_their_certificates():
  space = tree_space(parse_space("[(Del,1),(Ins,1),(Sub,2)]", synonyms=SYNONYMS)
                     .restricted_to(VOCAB))
  trees = [from_nested(n, 0) for n in ((("the", "good"), "movie"), ("a", "fun"), "bad",
                                       ("film", ("movie", "is")))]
  builder = TreeBatchBuilder(VOCAB, space, node_buckets=(16,))
  members = [list(space.enumerate(t)) for t in trees]
  predicted = [np.argmax(keyword_root_logits(builder.build([from_nested(m) for m in ms])), 1)
               for ms in members]

  result = exhaustive_tree_robustness(keyword_root_logits, space, trees, builder, batch_size=4)
  assert result.correct.tolist() == [True, True, False, True]
  assert result.robust.tolist() == [bool(np.all(p == 0)) for p in predicted] == [
      False, True, False, True]
  assert result.counterexamples[0] in members[0] and "bad" in str(result.counterexamples[0])
  assert result.members_evaluated[[1, 3]].tolist() == [len(members[1]), len(members[3])]

  audit = exhaustive_tree_robustness(keyword_root_logits, space, trees, builder,
                                     certified=[True, True, False, False], shortcut=False,
                                     batch_size=4)
  (failure,) = audit.audit_failures
  assert (failure.index, failure.sentence, failure.predicted) == (0, (("the", "good"), "movie"), 1)
  assert json.loads(json.dumps(failure.to_json()))["sentence"] == [["the", "good"], "movie"]


class Killed(Exception):
  """What a kill does to a search: it ends between two predictor calls."""


def killed_after(calls, predict_logits):
  """``predict_logits`` that raises :class:`Killed` at its call number ``calls + 1``."""
  count = iter(range(calls + 1))

  def predict(*args):
    if next(count) == calls:
      raise Killed
    return predict_logits(*args)
  return predict


def test_a_stopped_search_resumes_from_its_journal(tmp_path):
  space = parse_space("[(Sub,2)]", synonyms=SYNONYMS)
  sentences = random_sentences(np.random.default_rng(7), 40)
  labels = [0] * len(sentences)
  counter = RowCounter(keyword_logits)
  whole = exhaustive_robustness(counter, space, sentences, labels, VOCAB, batch_size=4)
  path = tmp_path / "ex.progress.jsonl"

  with pytest.raises(Killed):
    exhaustive_robustness(killed_after(12, keyword_logits), space, sentences, labels, VOCAB,
                          batch_size=4, journal=Journal(path, {"model": "keyword"}))
  lines = path.read_text().splitlines()
  with path.open("a") as file:
    file.write('{"index": 39, "correct": tr')  # a line cut short by the kill: searched again
  resumed_counter = RowCounter(keyword_logits)
  resumed = exhaustive_robustness(resumed_counter, space, sentences, labels, VOCAB, batch_size=4,
                                  journal=Journal(path, {"model": "keyword"}))

  assert resumed.resumed == len(lines) - 1 > 0
  np.testing.assert_array_equal(resumed.correct, whole.correct)
  np.testing.assert_array_equal(resumed.robust, whole.robust)
  assert resumed.counterexamples == whole.counterexamples  # the first in enumeration order
  assert (~whole.robust).any() and whole.robust.any()
  robust = whole.robust
  np.testing.assert_array_equal(resumed.members_evaluated[robust], whole.members_evaluated[robust])
  assert resumed_counter.rows < counter.rows  # the decided examples are not classified again
  # Every example is in the journal now; a search with another key starts it over.
  assert len(path.read_text().splitlines()) == 1 + len(sentences)
  complete = path.read_text()
  other = exhaustive_robustness(keyword_logits, space, sentences, labels, VOCAB, batch_size=4,
                                certified=[True] * len(sentences),
                                journal=Journal(path, {"model": "keyword"}))
  assert other.resumed == 0 and json.loads(path.read_text().splitlines()[0])["model"] == "keyword"
  # The replaced search's progress is kept aside, whole, and resumes once moved back.
  aside = path.with_name(path.name + ".replaced")
  assert aside.read_text() == complete
  aside.replace(path)
  back = exhaustive_robustness(keyword_logits, space, sentences, labels, VOCAB, batch_size=4,
                               journal=Journal(path, {"model": "keyword"}))
  assert back.resumed == len(sentences)
  again = exhaustive_robustness(keyword_logits, space, sentences, labels, VOCAB, batch_size=4,
                                journal=Journal(path, {"model": "another"}))
  assert again.resumed == 0
  np.testing.assert_array_equal(again.robust, whole.robust)


def test_a_tree_search_resumes_with_its_nested_counterexamples(tmp_path):
  space = tree_space(parse_space("[(Ins,1),(Sub,2)]", synonyms=SYNONYMS).restricted_to(VOCAB))
  trees = [from_nested(n, 0) for n in ((("the", "good"), "movie"), ("a", "fun"),
                                       ("good", ("movie", "good")), ("film", ("movie", "is")))]
  builder = TreeBatchBuilder(VOCAB, space, node_buckets=(16,))
  whole = exhaustive_tree_robustness(keyword_root_logits, space, trees, builder, batch_size=2)
  path = tmp_path / "trees.progress.jsonl"
  with pytest.raises(Killed):
    exhaustive_tree_robustness(killed_after(10, keyword_root_logits), space, trees, builder,
                               batch_size=2, journal=Journal(path, {}))

  resumed = exhaustive_tree_robustness(keyword_root_logits, space, trees, builder, batch_size=2,
                                       journal=Journal(path, {}))

  assert 0 < resumed.resumed < len(trees)
  np.testing.assert_array_equal(resumed.robust, whole.robust)
  assert resumed.counterexamples == whole.counterexamples
  assert isinstance(resumed.counterexamples[0][0], tuple)  # nested pairs, not JSON lists
