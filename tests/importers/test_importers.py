"""Importers of outside LSTM classifiers: random weights in each source layout give, once kept
and loaded by ``arc_jax.load_run``, the logits of a reference forward pass in the source's own
conventions (numpy for PyTorch and ARC, Flax's own cells for Flax) to 1e-5; a Flax model trained
here is certified by ``arc-certify`` as enumeration confirms; bad inputs are one-line errors."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import linen, nnx, serialization

from arc_jax.cli import import_model as import_cli
from arc_jax.importers import (ImporterError, import_checkpoint, import_params, import_state_dict,
                               write_kept_model)
from tests.helpers.importer_fixtures import (SENTENCES, SYNONYMS, WORDS, both_directions, certify_and_enumerate,
                               kept_logits, random_torch, torch_reference, two_logits)

TOLERANCE = 1e-5
VOCAB = {w: i for i, w in enumerate(WORDS)}


def _no_data(tmp_path, monkeypatch):
  monkeypatch.delenv("ARC_DATA_DIR", raising=False)
  monkeypatch.setenv("ARC_CACHE_DIR", str(tmp_path / "cache"))
  monkeypatch.setenv("ARC_DATA_MIRROR", "http://127.0.0.1:9")  # a download would fail loudly
  monkeypatch.chdir(tmp_path)


def _check_kept(source, reference_fn, tmp_path, name):
  """Keeps ``source``, loads it, and returns the largest logit difference from the reference."""
  dest = write_kept_model(tmp_path / "models" / name, source, VOCAB, space="[(Del,1),(Sub,1)]",
                          synonyms=SYNONYMS, provenance={"from": "test", "file": "-",
                                                         "sha256": "0" * 64, "vocab": "-"})
  logits, vocab = kept_logits(dest, SENTENCES)
  expected = np.array([two_logits(reference_fn([VOCAB[w] for w in s])) for s in SENTENCES])
  assert vocab == {w: i + 1 for i, w in enumerate(WORDS)}
  difference = float(np.abs(logits - expected).max())
  assert difference < TOLERANCE, (name, difference)
  return difference


# --------------------------------------------------------------------------- PyTorch layout

TORCH_CASES = {  # name: (projection, bidirectional, head_hidden, outputs, pooling, relu)
    "lstm_final_proj_2layer_1logit": (6, False, 5, 1, "final", True),
    "bilstm_final_noproj_1layer": (None, True, None, 2, "final", True),
    "lstm_mean_linearproj_1layer": (7, False, None, 2, "mean", False),
    "bilstm_mean_proj_2layer": (6, True, 5, 2, "mean", True),
}


@pytest.mark.parametrize("name", TORCH_CASES)
def test_torch_state_dicts_give_torchs_logits(name, tmp_path, monkeypatch):
  _no_data(tmp_path, monkeypatch)
  proj, bidirectional, head_hidden, out, pooling, relu = TORCH_CASES[name]
  sd = random_torch(np.random.default_rng(0), len(WORDS), 4, proj, 3, bidirectional,
                    head_hidden, out)
  source = import_state_dict(sd, pooling, projection_relu=relu)
  _check_kept(source, lambda ids: torch_reference(sd, ids, pooling, relu), tmp_path, name)


# --------------------------------------------------------------------------- ARC layout


def _arc_checkpoint(rng, bidirectional, projection):
  """A random ``lstm-dp`` state dict in ARC's layout (``ibp.Linear`` weights (out, in))."""
  r = lambda *shape: rng.normal(0, 0.5, shape).astype(np.float32)
  e, h = 4, 3
  sd = {"embs.weight": r(len(WORDS), e)}
  n_in = e
  if projection:
    sd |= {"linear_input.weight": r(h, e), "linear_input.bias": r(h)}
    n_in = h
  for prefix in ["lstm."] + (["lstm.back_"] if bidirectional else []):
    sd |= {f"{prefix}i2h.weight": r(4 * h, n_in), f"{prefix}i2h.bias": r(4 * h),
           f"{prefix}h2h.weight": r(4 * h, h), f"{prefix}h2h.bias": r(4 * h)}
  features = h * (2 if bidirectional else 1)
  return sd | {"fc_hidden.weight": r(h, features), "fc_hidden.bias": r(h),
               "fc_output.weight": r(1, h), "fc_output.bias": r(1)}


def _arc_reference(sd, ids, pooling):
  """ARC's LSTMDPModel.forward without bounds (docs/ORIGINAL.md §3.1, §5.2): relu(linear_input)
  (or the vectors), cells ``i2h(x) + h2h(h)`` with the gates [i | f | o | g], final state or mean
  over positions, fc_hidden → ReLU → fc_output: one logit."""
  sd = {k: np.asarray(v, np.float64) for k, v in sd.items()}
  x = sd["embs.weight"][ids]
  if "linear_input.weight" in sd:
    x = np.maximum(x @ sd["linear_input.weight"].T + sd["linear_input.bias"], 0)
  step = lambda p: lambda x_t, h: (sd[f"{p}i2h.weight"] @ x_t + sd[f"{p}i2h.bias"]
                                   + sd[f"{p}h2h.weight"] @ h + sd[f"{p}h2h.bias"])
  prefixes = ["lstm."] + (["lstm.back_"] if "lstm.back_i2h.weight" in sd else [])
  f = both_directions([step(p) for p in prefixes], x, sd["lstm.h2h.weight"].shape[1], "ifog",
                      pooling)
  f = np.maximum(f @ sd["fc_hidden.weight"].T + sd["fc_hidden.bias"], 0)
  return f @ sd["fc_output.weight"].T + sd["fc_output.bias"]


@pytest.mark.parametrize("bidirectional,projection,pooling",
                         [(False, True, "final"), (True, False, "mean")])
def test_arc_checkpoints_give_arcs_logit(bidirectional, projection, pooling, tmp_path,
                                         monkeypatch):
  _no_data(tmp_path, monkeypatch)
  sd = _arc_checkpoint(np.random.default_rng(1), bidirectional, projection)
  _check_kept(import_checkpoint(sd, pooling), lambda ids: _arc_reference(sd, ids, pooling),
              tmp_path, f"arc_{bidirectional}_{projection}_{pooling}")


# --------------------------------------------------------------------------- Flax layouts


class NNXClassifier(nnx.Module):
  """Embed → [Linear + ReLU] → nnx.RNN / nnx.Bidirectional of LSTM cells → pool → Linear(s)."""

  def __init__(self, *, cell, bidirectional, proj, head_hidden, out, pooling, rngs):
    emb, hidden = 4, 3
    self.embed = nnx.Embed(len(WORDS), emb, rngs=rngs)
    self.proj = nnx.Linear(emb, proj, rngs=rngs) if proj else None
    n_in = proj or emb
    forward = nnx.RNN(cell(n_in, hidden, rngs=rngs))
    self.rnn = (nnx.Bidirectional(forward, nnx.RNN(cell(n_in, hidden, rngs=rngs), reverse=True,
                                                   keep_order=True), rngs=rngs)
                if bidirectional else forward)
    features = hidden * (2 if bidirectional else 1)
    self.hidden = nnx.Linear(features, head_hidden, rngs=rngs) if head_hidden else None
    self.out = nnx.Linear(head_hidden or features, out, rngs=rngs)
    self.bidirectional, self.pooling = bidirectional, pooling

  def __call__(self, ids, lengths):
    """Logits (B, K) of padded ids (B, T)."""
    x = self.embed(ids)
    if self.proj is not None:
      x = jax.nn.relu(self.proj(x))
    carry, states = self.rnn(x, seq_lengths=lengths, return_carry=True)
    if self.pooling == "final":
      f = (jnp.concatenate([carry[0][1], carry[1][1]], -1) if self.bidirectional
           else carry[1])
    else:
      mask = (jnp.arange(ids.shape[1])[None, :] < lengths[:, None])[..., None]
      f = (states * mask).sum(1) / lengths[:, None]
    if self.hidden is not None:
      f = jax.nn.relu(self.hidden(f))
    return self.out(f)


def _randomized(model, seed):
  """``model`` with every parameter redrawn from N(0, 0.5²) (Flax initialises biases to 0)."""
  state = nnx.state(model, nnx.Param)
  leaves, treedef = jax.tree.flatten(state)
  keys = jax.random.split(jax.random.key(seed), len(leaves))
  nnx.update(model, jax.tree.unflatten(treedef, [0.5 * jax.random.normal(k, a.shape)
                                                 for k, a in zip(keys, leaves)]))
  return model


def _flax_logits(model, ids):
  return np.asarray(model(jnp.array([ids]), jnp.array([len(ids)])))[0]


NNX_CASES = {  # name: (cell, bidirectional, proj, head_hidden, outputs, pooling)
    "lstmcell_final_proj_2layer": (nnx.LSTMCell, False, 5, 6, 2, "final"),
    "optimized_bi_mean_1layer_1logit": (nnx.OptimizedLSTMCell, True, None, None, 1, "mean"),
    "lstmcell_bi_final_1layer": (nnx.LSTMCell, True, 5, None, 2, "final"),
    "optimized_mean_2layer": (nnx.OptimizedLSTMCell, False, None, 6, 2, "mean"),
}


@pytest.mark.parametrize("name", NNX_CASES)
def test_flax_nnx_states_give_flaxs_logits(name, tmp_path, monkeypatch):
  _no_data(tmp_path, monkeypatch)
  cell, bidirectional, proj, head_hidden, out, pooling = NNX_CASES[name]
  model = _randomized(NNXClassifier(cell=cell, bidirectional=bidirectional, proj=proj,
                                    head_hidden=head_hidden, out=out, pooling=pooling,
                                    rngs=nnx.Rngs(0)), seed=2)
  source = import_params(nnx.state(model), pooling)
  _check_kept(source, lambda ids: _flax_logits(model, ids), tmp_path, name)


class LinenClassifier(linen.Module):
  """Embed → Dense + ReLU → Linen RNN(s) of named cells → pool → Dense → ReLU → Dense."""

  cell: type
  bidirectional: bool
  pooling: str

  @linen.compact
  def __call__(self, ids):
    x = jax.nn.relu(linen.Dense(5, name="proj")(linen.Embed(len(WORDS), 4)(ids)))
    forward = linen.RNN(self.cell(3, name="forward"), return_carry=True)
    if self.bidirectional:
      backward = linen.RNN(self.cell(3, name="backward"), return_carry=True)
      (carry_f, carry_b), states = linen.Bidirectional(forward, backward, return_carry=True)(x)
      final = jnp.concatenate([carry_f[1], carry_b[1]], -1)
    else:
      (_, final), states = forward(x)
    f = final if self.pooling == "final" else states.mean(axis=1)
    return linen.Dense(2, name="out")(jax.nn.relu(linen.Dense(6, name="fc")(f)))


@pytest.mark.parametrize("cell,bidirectional,pooling",
                         [(linen.OptimizedLSTMCell, True, "final"), (linen.LSTMCell, False, "mean")])
def test_flax_linen_params_give_flaxs_logits(cell, bidirectional, pooling, tmp_path, monkeypatch):
  _no_data(tmp_path, monkeypatch)
  module = LinenClassifier(cell, bidirectional, pooling)
  variables = module.init(jax.random.key(0), jnp.zeros((1, 3), jnp.int32))
  leaves, treedef = jax.tree.flatten(variables)
  keys = jax.random.split(jax.random.key(3), len(leaves))
  variables = jax.tree.unflatten(treedef, [0.5 * jax.random.normal(k, a.shape)
                                           for k, a in zip(keys, leaves)])
  source = import_params(variables, pooling)
  _check_kept(source, lambda ids: np.asarray(module.apply(variables, jnp.array([ids])))[0],
              tmp_path, f"linen_{cell.__name__}_{pooling}")


# --------------------------------------------------------------------------- trained, certified


def _toy_data():
  """Sentences of WORDS labelled 1 when they hold a positive word, padded: (ids, lengths, y)."""
  rng = np.random.default_rng(4)
  positive, negative = {"good", "great", "fine"}, {"bad", "awful"}
  neutral = ["a", "movie", "film", "the", "and", "plot"]
  sentences, labels = [], []
  for _ in range(64):
    label = int(rng.integers(2))
    words = list(rng.choice(neutral, int(rng.integers(1, 5))))
    words.insert(int(rng.integers(len(words) + 1)),
                 rng.choice(sorted(positive if label else negative)))
    sentences.append(words)
    labels.append(label)
  width = max(map(len, sentences))
  ids = np.array([[VOCAB[w] for w in s] + [0] * (width - len(s)) for s in sentences], np.int32)
  return ids, np.array([len(s) for s in sentences], np.int32), np.array(labels), sentences


def test_a_trained_flax_model_is_imported_and_certified_as_enumeration_confirms(tmp_path,
                                                                                monkeypatch):
  _no_data(tmp_path, monkeypatch)
  model = NNXClassifier(cell=nnx.LSTMCell, bidirectional=True, proj=5, head_hidden=6, out=2,
                        pooling="final", rngs=nnx.Rngs(5))
  ids, lengths, labels, sentences = _toy_data()
  optimizer = nnx.Optimizer(model, optax.adam(0.05), wrt=nnx.Param)

  @nnx.jit
  def step(model, optimizer):
    loss = lambda m: optax.softmax_cross_entropy_with_integer_labels(m(ids, lengths),
                                                                     labels).mean()
    value, grads = nnx.value_and_grad(loss)(model)
    optimizer.update(model, grads)
    return value

  losses = [float(step(model, optimizer)) for _ in range(60)]
  assert losses[-1] < 0.5 * losses[0]
  weights = tmp_path / "model.msgpack"
  weights.write_bytes(serialization.msgpack_serialize(
      nnx.to_pure_dict(nnx.state(model, nnx.Param))))
  (tmp_path / "vocab.txt").write_text("\n".join(WORDS) + "\n")
  (tmp_path / "synonyms.json").write_text(json.dumps(SYNONYMS))
  dest = tmp_path / "imported" / "toy"
  assert import_cli.main(["--from", "flax", str(weights), "--vocab", str(tmp_path / "vocab.txt"),
                          "--space", "[(Del,1),(Sub,2)]", "--synonyms",
                          str(tmp_path / "synonyms.json"), "--out", str(dest)]) == 0
  logits, _ = kept_logits(dest, sentences[:8])
  assert np.abs(logits - np.asarray(model(ids[:8], lengths[:8]))).max() < TOLERANCE
  rows = certify_and_enumerate(dest, tmp_path, "[(Del,1),(Sub,2)]", sentences[:12])
  assert any(r["certified"] for r in rows) and all(r["space_size"] > 1 for r in rows)
  assert "imported by arc_jax" in (dest / "README.md").read_text()


# --------------------------------------------------------------------------- errors


def _one_line_error(capsys, argv, *expected):
  assert import_cli.main(argv) == 2
  err = capsys.readouterr().err
  assert err.count("\n") == 1 and err.startswith("error: "), err
  for text in expected:
    assert text in err, err


def test_unsupported_models_and_bad_inputs_are_one_line_errors(tmp_path, monkeypatch, capsys):
  _no_data(tmp_path, monkeypatch)
  rng = np.random.default_rng(6)
  good = random_torch(rng, len(WORDS), 4, 6, 3, False, 5, 2)
  (tmp_path / "vocab.txt").write_text("\n".join(WORDS) + "\n")
  base = ["--vocab", str(tmp_path / "vocab.txt"), "--space", "[(Sub,1)]"]

  def case(name, sd, *expected, kind="torch", extra=()):
    np.savez(tmp_path / f"{name}.npz", **sd)
    _one_line_error(capsys, ["--from", kind, str(tmp_path / f"{name}.npz"), *base, "--out",
                             str(tmp_path / name), *extra], *expected)

  stacked = good | {"lstm.weight_ih_l1": good["lstm.weight_ih_l0"][:, :3]}
  case("stacked", stacked, "stacked LSTM", "num_layers=1")
  gru = {k: v[:9] if k.startswith("lstm.") else v for k, v in good.items()}
  case("gru", gru, "a GRU", "only LSTM cells")
  bi = random_torch(rng, len(WORDS), 4, 6, 3, True, 5, 2)
  case("missing", {k: v for k, v in bi.items() if k != "lstm.weight_hh_l0_reverse"},
       "'lstm.weight_hh_l0_reverse' is missing")
  case("no_fit", good | {"fc2.weight": good["fc2.weight"][:, :4]}, "do not fit", "--head")
  case("shape", good | {"lstm.bias_ih_l0": good["lstm.bias_ih_l0"][:5]}, "bias_ih_l0",
       "has shape [5]")
  case("extra", good | {"norm.running_mean": np.zeros(3, np.float32)}, "norm.running_mean",
       "no supported layer")
  case("arc_missing", {k: v for k, v in _arc_checkpoint(rng, False, True).items()
                       if k != "fc_output.bias"}, "fc_output.bias", "is missing", kind="arc")
  case("wrong_option", good, "--cells", "not used by --from torch",
       extra=("--cells", "a,b"))
  np.savez(tmp_path / "ok.npz", **good)
  _one_line_error(capsys, ["--from", "torch", str(tmp_path / "ok.npz"), "--vocab",
                           str(tmp_path / "vocab.txt"), "--space", "[(Nope,1)]", "--out",
                           str(tmp_path / "bad_space")], "Nope")
  (tmp_path / "short.txt").write_text("\n".join(WORDS[:-1] + [WORDS[1]]) + "\n")
  _one_line_error(capsys, ["--from", "torch", str(tmp_path / "ok.npz"), "--vocab",
                           str(tmp_path / "short.txt"), "--space", "[(Sub,1)]", "--out",
                           str(tmp_path / "dup")], "more than one line")
  # Linen's default cell names do not tell the directions apart.
  with pytest.raises(ImporterError, match="--cells FORWARD,BACKWARD"):
    import_params({"params": {f"OptimizedLSTMCell_{i}": {
        **{g: {"kernel": np.zeros((4, 3))} for g in ("ii", "if", "ig", "io")},
        **{g: {"kernel": np.zeros((3, 3)), "bias": np.zeros(3)} for g in ("hi", "hf", "hg", "ho")}}
        for i in range(2)}})


def test_a_pt_file_without_torch_says_how_to_fix_it(tmp_path, monkeypatch, capsys):
  monkeypatch.setitem(__import__("sys").modules, "torch", None)  # import torch fails
  (tmp_path / "m.pt").write_bytes(b"")
  (tmp_path / "vocab.txt").write_text("\n".join(WORDS) + "\n")
  _one_line_error(capsys, ["--from", "torch", str(tmp_path / "m.pt"), "--vocab",
                           str(tmp_path / "vocab.txt"), "--space", "[(Sub,1)]", "--out",
                           str(tmp_path / "out")], "needs PyTorch", "pip install torch", ".npz")
