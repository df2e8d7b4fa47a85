"""The abstract-domain seam (:mod:`arc_jax.domain`), proved with a second, trivial domain.

The "point" domain (:mod:`arc_jax.domains.point`) holds concrete values, not sets. Run through
the same cells and DPs as the interval domain, on spaces that match nowhere (so S(x) = {x},
while the decomposition grid, the branches and the masked joins of every transformation are all
exercised), it must reproduce the plain forward pass of every model family: equal to float64
rounding (tolerance 1e-12, since the DP and the forward pass are different XLA programs that may
fuse and order sums differently). The domains are also reachable by name
(:mod:`arc_jax.domains`): the registry's entries, and ``domain="point"`` in the certify API.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import arc_jax
from arc_jax.certify import certify_jit
from arc_jax.certify.tree_dp import JOINS
from arc_jax.nn import LSTMClassifier, predict
from arc_jax.nn.tree_models import TreeLSTMClassifier, predict_tree
from arc_jax.perturbation import PlanBuilder, parse_space
from arc_jax.data import from_nested
from arc_jax import domains
from arc_jax.domains.point import POINT
from arc_jax.perturbation.trees import TreeBatchBuilder, tree_space

TOL = 1e-12


@pytest.fixture(autouse=True, scope="module")
def float64():
  with jax.enable_x64(True):
    yield


WORDS = ["<pad>", "a", "the", "good", "movie", "film", "is", "fine", "x"]
VOCAB = {w: i for i, w in enumerate(WORDS)}
NEVER = lambda w: False
# Every shape of rewrite the DPs handle (1→1, 1→0, 1→2, 2→2, 3→1), none of which ever matches.
UNMATCHED = [arc_jax.custom(f"T{s}{t}", s, t, match=NEVER, replace=lambda w, t=t: [("x",) * t])
             for s, t in ((1, 1), (1, 0), (1, 2), (2, 2), (3, 1))]
SEQUENCE_SPACES = {"empty": "[]", "unmatched": "[(T11,2),(T10,1),(T12,1),(T22,1),(T31,1)]"}
SENTENCES = [["a", "good", "movie"], ["the", "film", "is", "fine", "x"], ["x"]]


@pytest.mark.parametrize("space_name", sorted(SEQUENCE_SPACES))
@pytest.mark.parametrize("family", [("final", False), ("mean", False), ("final", True),
                                    ("attention", True)])
def test_point_domain_dp_is_the_forward_pass(family, space_name):
  pooling, bidirectional = family
  rng = np.random.default_rng(0)
  model = LSTMClassifier(rng.normal(size=(len(WORDS), 4)), hidden=3, projection=3, head_hidden=3,
                         num_classes=3, bidirectional=bidirectional, pooling=pooling,
                         dropout_rate=0.0, rngs=nnx.Rngs(0), param_dtype=jnp.float64)
  space = parse_space(SEQUENCE_SPACES[space_name],
                      custom={t.name: t for t in UNMATCHED}).restricted_to(VOCAB)
  plan = PlanBuilder(space, VOCAB).build(SENTENCES, batch_size=4)
  labels = jnp.asarray([0, 1, 2, 0], jnp.int32)
  graphdef, state = nnx.split(model)
  cert = certify_jit(graphdef, space.signature, state, plan, labels, domain=POINT)
  logits = np.asarray(predict(graphdef, state, plan.token_ids, plan.lengths))[:len(SENTENCES)]
  rows = slice(0, len(SENTENCES))
  for got in (cert.logits.lo, cert.logits.hi, cert.clean_logits):
    np.testing.assert_allclose(np.asarray(got)[rows], logits, rtol=TOL, atol=TOL)
  y = np.asarray(labels)[rows]
  margins = logits[np.arange(len(y)), y][:, None] - logits
  np.testing.assert_allclose(np.asarray(cert.margins)[rows], margins, rtol=TOL, atol=TOL)


@pytest.mark.parametrize("join", JOINS)
def test_point_domain_tree_dp_is_the_forward_pass(join):
  rng = np.random.default_rng(1)
  abstract = nnx.eval_shape(lambda: TreeLSTMClassifier(
      np.zeros((len(WORDS), 4)), hidden=3, num_classes=3, dropout_rate=0.0, rngs=nnx.Rngs(0),
      param_dtype=jnp.float64))
  graphdef, state = nnx.split(abstract)
  state = jax.tree.map(lambda v: jnp.asarray(rng.normal(size=v.shape)), state)
  # Sub and Del over a lexicon without synonyms or stop words: nothing matches anywhere.
  space = tree_space(parse_space("[(Sub,2),(Del,1)]", synonyms={}, stopwords=[]))
  trees = [from_nested(("a", ("good", "movie")), 1), from_nested((("the", "film"), ("is", "x")), 2),
           from_nested("x", 0)]
  batch = TreeBatchBuilder(VOCAB, space).build(trees, batch_size=4)
  cert = certify_jit(graphdef, space.signature, state, batch, batch.labels, join=join,
                     domain=POINT)
  logits = np.asarray(predict_tree(graphdef, state, batch))
  for b, tree in enumerate(trees):
    nodes = slice(0, tree.num_nodes)
    for got in (cert.logits.lo, cert.logits.hi, cert.clean_logits):
      np.testing.assert_allclose(np.asarray(got)[b, nodes], logits[b, nodes], rtol=TOL, atol=TOL)
    root = logits[b, tree.num_nodes - 1]
    np.testing.assert_allclose(np.asarray(cert.at_root(cert.margins))[b],
                               root[tree.labels[-1]] - root, rtol=TOL, atol=TOL)


def test_the_registry_names_the_built_in_domains_and_refuses_unknown_ones():
  from arc_jax import interval as iv
  from arc_jax.linear_step import LINEAR_STEP
  assert list(domains.DOMAINS)[:3] == ["interval", "linear_step", "point"]
  assert domains.DEFAULT == "interval"
  assert domains.make_domain("interval") is iv.SOUND and domains.resolve("interval") is iv.SOUND
  assert domains.make_domain("linear_step") is LINEAR_STEP
  assert domains.make_domain("point") is POINT and domains.resolve(POINT) is POINT
  assert all(e.help and "\n" not in e.help for e in domains.DOMAINS.values())
  with pytest.raises(ValueError, match=r"^Unknown domain 'box'; choose one of \[.*'interval', "
                     r"'linear_step', 'point'.*\]"):
    domains.make_domain("box")
  with pytest.raises(ValueError, match=r"Domain 'interval' has no settings \(got \['width'\]\)"):
    domains.make_domain("interval", {"width": "2"})
  with pytest.raises(ValueError, match="already registered"):
    domains.register_domain("interval", "again", lambda s: iv.SOUND)


def test_the_certify_api_takes_a_domain_by_name():
  rng = np.random.default_rng(2)
  model = LSTMClassifier(rng.normal(size=(len(WORDS), 4)), hidden=3, projection=3, head_hidden=3,
                         num_classes=3, dropout_rate=0.0, rngs=nnx.Rngs(0),
                         param_dtype=jnp.float64)
  space = parse_space(SEQUENCE_SPACES["unmatched"], custom={t.name: t for t in UNMATCHED})
  by_name = arc_jax.certify(model, space, SENTENCES, [0, 1, 2], VOCAB, domain="point")
  by_value = arc_jax.certify(model, space, SENTENCES, [0, 1, 2], VOCAB, domain=POINT)
  for key in ("margins", "logits_lo", "logits_hi", "clean_logits"):
    np.testing.assert_array_equal(by_name[key], by_value[key])
  with pytest.raises(ValueError, match=r"^Unknown domain 'box'; choose one of"):
    arc_jax.certify(model, space, SENTENCES, [0, 1, 2], VOCAB, domain="box")
