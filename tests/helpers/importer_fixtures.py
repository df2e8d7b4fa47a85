"""Shared by the importer tests: source layouts' reference forward passes in numpy (float64, the
source framework's own conventions), and checking a kept model against them and enumeration."""

import json

import numpy as np
from flax import nnx

import arc_jax
from arc_jax.cli import certify as certify_cli
from arc_jax.nn.models import predict

WORDS = ["<pad>", "a", "good", "great", "bad", "awful", "movie", "film", "the", "and", "plot",
         "fine"]
SENTENCES = [["a", "good", "movie"], ["the", "plot", "and", "the", "film", "awful"], ["bad"],
             ["fine", "great", "film", "a", "movie"]]
SYNONYMS = {"good": ["great", "fine"], "great": ["good"], "bad": ["awful"], "awful": ["bad"],
            "movie": ["film"], "film": ["movie"]}


def sigmoid(x):
  return 1.0 / (1.0 + np.exp(-x))


def lstm_run(gates_of, x, hidden, order):
  """States (T, H) of an LSTM over x (T, in); ``gates_of(x_t, h)`` gives the 4H pre-activations
  with the gates in ``order``."""
  h, c, states = np.zeros(hidden), np.zeros(hidden), []
  for x_t in x:
    g = dict(zip(order, np.split(gates_of(x_t, h), 4)))
    c = sigmoid(g["f"]) * c + sigmoid(g["i"]) * np.tanh(g["g"])
    h = sigmoid(g["o"]) * np.tanh(c)
    states.append(h)
  return np.array(states)


def pooled(runs, pooling):
  """Final or mean pooling of each direction's states (T, H), the backward run's states in
  reading order (last = after the first word)."""
  if pooling == "final":
    return np.concatenate([r[-1] for r in runs])
  return np.concatenate([r.mean(axis=0) for r in runs])


def both_directions(step_fns, x, hidden, order, pooling):
  runs = [lstm_run(fn, seq, hidden, order) for fn, seq in zip(step_fns, (x, x[::-1]))]
  return pooled(runs, pooling)


def torch_reference(sd, ids, pooling, relu=True):
  """Logits of a PyTorch Embedding → [Linear (+ReLU)] → LSTM → pool → Linear[→ReLU→Linear]
  state dict (names ``emb``, ``proj``, ``lstm``, ``fc1``[, ``fc2``]), in torch's equations:
  W x + b with weights (out, in), gates (i, f, g, o), two biases."""
  sd = {k: np.asarray(v, np.float64) for k, v in sd.items()}
  x = sd["emb.weight"][ids]
  if "proj.weight" in sd:
    x = x @ sd["proj.weight"].T + sd["proj.bias"]
    x = np.maximum(x, 0) if relu else x
  hidden = sd["lstm.weight_hh_l0"].shape[1]

  def step(suffix):
    return lambda x_t, h: (sd[f"lstm.weight_ih{suffix}"] @ x_t + sd[f"lstm.bias_ih{suffix}"]
                           + sd[f"lstm.weight_hh{suffix}"] @ h + sd[f"lstm.bias_hh{suffix}"])

  suffixes = ["_l0"] + (["_l0_reverse"] if "lstm.weight_ih_l0_reverse" in sd else [])
  f = both_directions([step(s) for s in suffixes], x, hidden, "ifgo", pooling)
  layers = [n for n in ("fc1", "fc2") if f"{n}.weight" in sd]
  for i, name in enumerate(layers):
    f = f @ sd[f"{name}.weight"].T + sd[f"{name}.bias"]
    f = np.maximum(f, 0) if i < len(layers) - 1 else f
  return f


def random_torch(rng, vocab, emb, proj, hidden, bidirectional, head_hidden, out):
  """A random state dict in the layout :func:`torch_reference` reads."""
  r = lambda *shape: rng.normal(0, 0.5, shape).astype(np.float32)
  sd = {"emb.weight": r(vocab, emb)}
  n_in = emb
  if proj:
    sd |= {"proj.weight": r(proj, emb), "proj.bias": r(proj)}
    n_in = proj
  for s in ["_l0"] + (["_l0_reverse"] if bidirectional else []):
    sd |= {f"lstm.weight_ih{s}": r(4 * hidden, n_in), f"lstm.weight_hh{s}": r(4 * hidden, hidden),
           f"lstm.bias_ih{s}": r(4 * hidden), f"lstm.bias_hh{s}": r(4 * hidden)}
  features = hidden * (2 if bidirectional else 1)
  dims = [features] + ([head_hidden] if head_hidden else []) + [out]
  for i, (a, b) in enumerate(zip(dims, dims[1:])):
    sd |= {f"fc{i + 1}.weight": r(b, a), f"fc{i + 1}.bias": r(b)}
  return sd


def two_logits(reference):
  """A source's K = 1 or 2 logits as arc_jax's two: (0, z) for one logit z."""
  reference = np.atleast_1d(reference)
  return np.array([0.0, reference[0]]) if reference.shape[-1] == 1 else reference


def kept_logits(dest, sentences):
  """Logits (n, 2) of the kept model ``dest`` (loaded by load_run) on ``sentences``, in one
  padded batch, and its vocabulary."""
  model, vocab, _ = arc_jax.load_run(dest)
  graphdef, state = nnx.split(model)
  width = max(len(s) for s in sentences)
  ids = np.array([[vocab[w] for w in s] + [0] * (width - len(s)) for s in sentences], np.int32)
  lengths = np.array([len(s) for s in sentences], np.int32)
  return np.asarray(predict(graphdef, state, ids, lengths)), vocab


def certify_and_enumerate(dest, tmp_path, space, sentences=SENTENCES):
  """Runs arc-certify on ``sentences`` with the kept model ``dest`` and checks every certificate
  against the enumeration of S(x); returns the JSON rows."""
  (tmp_path / "in.txt").write_text("\n".join(" ".join(s) for s in sentences) + "\n")
  out = tmp_path / "certified.jsonl"
  assert certify_cli.main(["--model", str(dest), "--space", space, "--output", str(out),
                           str(tmp_path / "in.txt")]) == 0
  rows = [json.loads(line) for line in out.read_text().splitlines()]
  model, vocab, space_ = arc_jax.load_run(dest, space=space)
  graphdef, state = nnx.split(model)
  for row in rows:
    members = list(space_.enumerate(row["tokens"]))
    width = max(1, max(len(m) for m in members))
    ids = np.array([[vocab[w] for w in m] + [0] * (width - len(m)) for m in members], np.int32)
    labels = np.argmax(np.asarray(predict(graphdef, state, ids, np.array(
        [len(m) for m in members], np.int32))), axis=-1)
    assert row["prediction"] == labels[0] == row["label"]
    if row["certified"]:
      assert (labels == row["label"]).all(), row
  return rows
