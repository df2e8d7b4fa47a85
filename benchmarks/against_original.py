"""arc_jax's certificates against the original ARC PyTorch code, sentence by sentence, one JSON line
per (model, space).

    python benchmarks/against_original.py --original PATH --workdir results/arc_lstm_del2sub2
        [--space "[(Del,2),(Sub,2)]"] [--limit N] [--batch-size 32] [--out FILE.json]
    python benchmarks/against_original.py --resummarize FILE.json...   # summaries, no torch

Builds the original's specialised DP model (``text_classification.LSTMDPModel`` over
``ibp.LSTMDP``, the class its ``lstm-dp`` / ``lstm-dp-general`` certification uses, docs/ORIGINAL.md
§2.4) with a kept model's weights (embeddings, projection = ``linear_input``, LSTM ``i2h``/``h2h``
with the same [i|f|o|g] gate layout, head; the two logits (z0, z1) become the original's single
logit z1 − z0), feeds it the same test sentences (already tokenised and restricted to the
vocabulary), the same ids, and the same substitution candidates (arc_jax's space restricted to the
vocabulary, handed to the original's ``Perturbation`` through a stand-in attack surface; its own
``Del`` finds the deletable stop words and its own ``TextClassificationDataset.from_raw_data``
builds the choice tensors and the dummy Ins slots), certifies them in batches with
``compute_bounds=True`` (the original's ``test()``: label 1 certified iff the logit's lower bound
is > 0, label 0 iff its upper bound is < 0), and certifies the same sentences with
:func:`arc_jax.certify.certify`. The output file (default
``results/benchmarks/against_original_<run>_<space>.json``) holds, per sentence, its id (index
in the test split), label, prediction (both sides), both certified flags, both lower bounds of
the margin z_y − z_{1−y} over S(x), and |S(x)| (``Space.count``: application choices, before
duplicates are removed), plus a summary (:func:`compare`): certified by both / only arc_jax /
only the original / neither, the largest |clean logit difference| and the predictions that
differ. The printed JSON line is that summary.

The original's HEAD (3fa5d04) crashes on any space with Ins (``ins_extend_special_pre`` is read
before it is assigned, ``src/ibp.py:687``); this script copies the checkout's ``src`` into a
temporary folder and adds the one-line fix ``ins_extend_special_pre = None`` before the DP's time
loop (only where the name is read but never initialised, so a ``b715d86`` checkout runs
unchanged). Modules the LSTM path imports but never uses (``dgl``, ``keras``, ``nltk``) are
replaced by empty stand-ins when they are not installed. ``ibp.DEBUG`` (a sanity check inside
every interval constructor) is switched off (``--debug-checks`` keeps it).

Setup (torch is never a dependency of arc_jax; only this script imports it)::

    python3.12 -m venv venvt && venvt/bin/pip install -r requirements.txt torch==2.13.0
    venvt/bin/pip install -e .
    git clone https://github.com/ForeverZyh/certified_lstms /tmp/orig   # commit 3fa5d04 (HEAD)

Commands (the committed results, ARC_DATA_DIR pointing at the data folder)::

    for run in arc_lstm_del2sub2 normal_lstm; do
      venvt/bin/python benchmarks/against_original.py --original /tmp/orig \\
          --workdir results/$run --space "[(Del,2),(Sub,2)]" --unrounded; done
    for run in arc_lstm_sub2ins2 normal_lstm; do
      venvt/bin/python benchmarks/against_original.py --original /tmp/orig \\
          --workdir results/$run --space "[(Sub,2),(Ins,2)]" --unrounded; done
    for run in arc_lstm_del2ins2 normal_lstm; do
      venvt/bin/python benchmarks/against_original.py --original /tmp/orig \\
          --workdir results/$run --space "[(Del,2),(Ins,2)]" --unrounded; done
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

import numpy as np

INS_FIX = "ins_extend_special_pre = None"


# --------------------------------------------------------------------------- pure comparison


def compare(labels, ours_certified, ours_margin, ours_logit, theirs_certified, theirs_margin,
            theirs_logit, ids=None) -> dict:
  """The summary of two sides' per-sentence results (numpy-convertible, one entry per sentence).

  ``*_logit``: the clean single logit z1 − z0 (prediction 1 iff > 0); ``*_margin``: the lower
  bound of z_y − z_{1−y} over S(x); a sentence the original skipped is NaN / False on its side
  (``theirs_logit`` NaN) and counted under ``skipped_by_original``, not in the four verdict
  counts. ``margin_original_higher``: sentences where the original's margin bound exceeds arc_jax's
  by more than 1e-5 (the two DPs' boxes are different over-approximations, neither always inside
  the other).
  """
  labels = np.asarray(labels, int)
  ids = np.arange(len(labels)) if ids is None else np.asarray(ids)
  oc, tc = np.asarray(ours_certified, bool), np.asarray(theirs_certified, bool)
  ol, tl = np.asarray(ours_logit, float), np.asarray(theirs_logit, float)
  om, tm = np.asarray(ours_margin, float), np.asarray(theirs_margin, float)
  ran = ~np.isnan(tl)
  diff = np.abs(ol - tl)[ran]
  op, tp = ol > 0, tl > 0
  margin_gap = (om - tm)[ran]
  return {
      "sentences": int(len(labels)),
      "compared": int(ran.sum()),
      "skipped_by_original": [int(i) for i in ids[~ran]],
      "certified_both": int((oc & tc & ran).sum()),
      "certified_only_arc_jax": int((oc & ~tc & ran).sum()),
      "certified_only_original": int((~oc & tc & ran).sum()),
      "certified_neither": int((~oc & ~tc & ran).sum()),
      "certified_arc_jax": int((oc & ran).sum()),
      "certified_original": int((tc & ran).sum()),
      "ids_only_original": [int(i) for i in ids[~oc & tc & ran]],
      "accuracy_arc_jax": round(float((op == labels.astype(bool))[ran].mean()), 6) if ran.any() else None,
      "accuracy_original": round(float((tp == labels.astype(bool))[ran].mean()), 6) if ran.any() else None,
      "max_abs_logit_diff": float(diff.max()) if diff.size else None,
      "prediction_differs": [int(i) for i in ids[ran & (op != tp)]],
      "margin_original_higher": int((margin_gap < -1e-5).sum()),
      "margin_arc_jax_minus_original": (
          {"min": float(margin_gap.min()), "median": float(np.median(margin_gap)),
           "max": float(margin_gap.max())} if margin_gap.size else None),
  }


def unrounded_summary(unrounded, theirs_margin) -> dict:
  """With ``--unrounded``: the sentences where the original's margin bound still exceeds
  arc_jax's when arc_jax does not round outward either (by more than 1e-5)."""
  gap = (np.asarray(unrounded, float) - np.asarray(theirs_margin, float))
  gap = gap[~np.isnan(gap)]
  return {"margin_original_higher_than_unrounded": int((gap < -1e-5).sum()),
          "margin_unrounded_minus_original_min": float(gap.min()) if gap.size else None}


def dump(data: dict) -> str:
  """The result file's text: the header fields indented, one line per sentence."""
  head = {k: v for k, v in data.items() if k != "sentences"}
  rows = ",\n".join("  " + json.dumps(r) for r in data.get("sentences", []))
  return json.dumps(head, indent=1)[:-2] + ',\n "sentences": [\n' + rows + "\n ]\n}\n"


def summarize_file(path: Path) -> dict:
  """Recomputes the ``summary`` of a written result file from its per-sentence rows (no torch,
  no checkout: ``--resummarize FILE``), writes it back and returns it."""
  data = json.loads(Path(path).read_text())
  rows = data["sentences"]
  col = lambda key, missing: [missing if r[key] is None else r[key] for r in rows]  # noqa: E731
  data["summary"] = compare(col("label", 0), col("certified_arc_jax", False),
                            col("margin_lb_arc_jax", np.nan), col("logit_arc_jax", np.nan),
                            col("certified_original", False), col("margin_lb_original", np.nan),
                            col("logit_original", np.nan), ids=col("id", -1))
  if rows and "margin_lb_arc_jax_unrounded" in rows[0]:
    data["summary"] |= unrounded_summary(col("margin_lb_arc_jax_unrounded", np.nan),
                                         col("margin_lb_original", np.nan))
  Path(path).write_text(dump(data))
  return data["summary"]


def space_tag(spec: str) -> str:
  """``"[(Del,2),(Sub,2)]"`` → ``"del2sub2"`` (file names)."""
  return "".join(f"{n.lower()}{d}" for n, d in re.findall(r"\(\s*(\w+)\s*,\s*(\d+)\s*\)", spec))


# --------------------------------------------------------------------------- the original


def patched_source(original: Path, into: Path) -> tuple[Path, bool]:
  """A copy of ``original/src`` in ``into`` with the one-line Ins fix in ``ibp.py`` where the
  checkout needs it; returns the copy and whether it was patched."""
  src = into / "src"
  shutil.copytree(original / "src", src)
  ibp = src / "ibp.py"
  text = ibp.read_text()
  patched = False
  if "ins_extend_special_pre" in text and not re.search(r"ins_extend_special_pre\s*=\s*None", text):
    loop = re.compile(r"^(\s*)for idxs_idx, i in enumerate\(idxs\):", re.M)
    if not loop.search(text):
      raise SystemExit("against_original: the checkout's ibp.py has no DP time loop to patch.")
    text = loop.sub(lambda m: f"{m.group(1)}{INS_FIX}  # against_original.py: the Ins fix\n"
                    f"{m.group(0)}", text, count=1)
    ibp.write_text(text)
    patched = True
  return src, patched


def import_original(src: Path, debug_checks: bool):
  """``(text_classification, ibp)`` of the (patched) source, unused imports stubbed."""
  import importlib.util

  def unused(*_args, **_kwargs):
    raise RuntimeError("a stand-in of against_original.py for a module the original imports "
                       "but its LSTM certification never uses")

  stubs = {"dgl": {}, "keras": {"layers": types.SimpleNamespace(Layer=object)},
           "keras.backend": {"gradients": unused},
           "nltk": {"word_tokenize": unused, "pos_tag": unused}}
  stubbed = set()
  for name, attrs in stubs.items():
    top = name.split(".")[0]
    if name not in sys.modules and (top in stubbed or importlib.util.find_spec(top) is None):
      stubbed.add(name)
      module = types.ModuleType(name)
      module.__dict__.update(attrs)
      sys.modules[name] = module
  if "keras.backend" in sys.modules and not hasattr(sys.modules["keras"], "backend"):
    sys.modules["keras"].backend = sys.modules["keras.backend"]
  sys.path.insert(0, str(src))
  import ibp  # noqa: E402  (the original's)
  import text_classification  # noqa: E402
  ibp.DEBUG = debug_checks
  return text_classification, ibp


class _Vocab:
  """The original's vocabulary interface (``in``, ``get_index``) over arc_jax's word → id."""

  def __init__(self, vocab):
    self.vocab = vocab

  def __contains__(self, word):
    return word in self.vocab

  def get_index(self, word):
    return self.vocab[word]


class _Surface:
  """The original's attack-surface interface: per token of a sentence, arc_jax's Sub candidates
  (the space restricted to the vocabulary) at that position."""

  def __init__(self, candidates):
    self.candidates = candidates  # tuple(tokens) → list of candidate lists

  def get_swaps(self, words):
    return self.candidates[tuple(words)]


def original_model(tc, torch, params: dict, spec: str):
  """``LSTMDPModel`` for ``spec`` with the arc_jax parameters ``params`` (dotted path → array)."""
  emb = params["embeddings"]
  hidden = params["forward_cell.h2h.kernel"].shape[0]
  model = tc.LSTMDPModel(emb.shape[1], hidden, torch.tensor(emb), "cpu", pool="final",
                         dropout=0.2, no_wordvec_layer=False, bidirectional=False,
                         perturbation=spec)
  out_k, out_b = params["head_out.kernel"], params["head_out.bias"]
  t = lambda a: torch.tensor(np.ascontiguousarray(a, np.float32))  # noqa: E731
  state = {
      "embs.weight": t(emb),
      "linear_input.weight": t(params["projection.linear.kernel"].T),
      "linear_input.bias": t(params["projection.linear.bias"]),
      "lstm.i2h.weight": t(params["forward_cell.i2h.kernel"].T),
      "lstm.i2h.bias": t(params["forward_cell.i2h.bias"]),
      "lstm.h2h.weight": t(params["forward_cell.h2h.kernel"].T),
      "lstm.h2h.bias": t(params["forward_cell.h2h.bias"]),
      "fc_hidden.weight": t(params["head_hidden.kernel"].T),
      "fc_hidden.bias": t(params["head_hidden.bias"]),
      "fc_output.weight": t((out_k[:, 1] - out_k[:, 0])[None, :]),
      "fc_output.bias": t(out_b[1:2] - out_b[0:1]),
  }
  model.load_state_dict(state, strict=True)
  model.eval()
  return model


def run_original(tc, torch, model, spec, sentences, labels, vocab, candidates, batch_size):
  """Per sentence: (certified, margin lower bound, clean logit); NaN logit where the original
  skips the sentence (empty after its OOV removal)."""
  surface, ovocab = _Surface(candidates), _Vocab(vocab)
  n = len(sentences)
  certified, margin, logit = np.zeros(n, bool), np.full(n, np.nan), np.full(n, np.nan)
  examples = []
  for i, (words, y) in enumerate(zip(sentences, labels)):
    data = tc.TextClassificationDataset.from_raw_data([(" ".join(words), int(y))], ovocab,
                                                      attack_surface=surface, perturbation=spec)
    if data.examples:
      examples.append((i, data.examples[0]))
  with torch.no_grad():
    for start in range(0, len(examples), batch_size):
      chunk = examples[start:start + batch_size]
      batch = tc.TextClassificationDataset.collate_examples([e for _, e in chunk])
      out = model.forward(batch, compute_bounds=True)
      val, lb, ub = (np.asarray(a.detach().numpy(), float)[:, 0] for a in (out.val, out.lb, out.ub))
      idx = np.array([i for i, _ in chunk])
      y = np.asarray(labels)[idx]
      m = np.where(y == 1, lb, -ub)  # the original's test(): lb·(2y−1) > 0 and ub·(2y−1) > 0
      certified[idx], margin[idx], logit[idx] = m > 0, m, val
  return certified, margin, logit


# --------------------------------------------------------------------------- main


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  if "--resummarize" in sys.argv[1:2]:
    for path in sys.argv[2:]:
      print(json.dumps({"file": path, **summarize_file(Path(path))}), flush=True)
    return
  parser.add_argument("--original", required=True, type=Path,
                      help="a checkout of ForeverZyh/certified_lstms (its src/ is copied)")
  parser.add_argument("--workdir", required=True, help="a kept model of results/ (or a run)")
  parser.add_argument("--space", help="default: the run's space")
  parser.add_argument("--limit", type=int, help="the first N test sentences (default all)")
  parser.add_argument("--batch-size", type=int, default=32)
  parser.add_argument("--torch-threads", type=int, default=1,
                      help="torch's intra-op threads (1: tens of times faster than 2 on a busy "
                      "2-core machine, the DP's tensors are small)")
  parser.add_argument("--unrounded", action="store_true",
                      help="also certify with arc_jax's UNROUNDED domain (no outward rounding, as "
                      "the original): adds margin_lb_arc_jax_unrounded per sentence")
  parser.add_argument("--debug-checks", action="store_true", help="keep the original's ibp.DEBUG")
  parser.add_argument("--out", type=Path, help="default results/benchmarks/"
                      "against_original_<run>_<space>.json")
  args = parser.parse_args()

  from flax import nnx

  from arc_jax.certify import certify
  from arc_jax.evaluation import load_experiment
  from arc_jax.importers.layout import flatten

  model, experiment = load_experiment(args.workdir, **({"space": args.space} if args.space else {}))
  vocab = experiment.data.vocab
  space = experiment.space.restricted_to(vocab)
  spec = args.space or experiment.config.space
  test = experiment.splits["test"]
  sentences = [tuple(s) for s in test.tokens[:args.limit]]
  labels = np.asarray(test.labels[:args.limit], int)
  oov = sum(w not in vocab for s in sentences for w in s)
  if oov:
    raise SystemExit(f"against_original: {oov} test tokens are not in the vocabulary.")

  tic = time.perf_counter()
  ours = certify(model, space, sentences, labels, vocab)
  ours_s = time.perf_counter() - tic
  rows = np.arange(len(labels))
  unrounded = None
  if args.unrounded:
    from arc_jax import interval as iv
    unrounded = np.asarray(certify(model, space, sentences, labels, vocab,
                                   domain=iv.UNROUNDED).margins)[rows, 1 - labels]
  ours_margin = np.asarray(ours.margins)[rows, 1 - labels]
  ours_logit = np.asarray(ours.clean_logits)[:, 1] - np.asarray(ours.clean_logits)[:, 0]

  names = space.names
  sub = names.index("Sub") if "Sub" in names else None
  candidates = {}
  for s in sentences:
    windows = space.windows(s)
    candidates[s] = [[r[0] for r in windows[i][sub]] if sub is not None else []
                     for i in range(len(s))]

  import torch
  torch.manual_seed(0)
  torch.set_num_threads(args.torch_threads)
  with tempfile.TemporaryDirectory(prefix="against_original_") as tmp:
    src, patched = patched_source(args.original.resolve(), Path(tmp))
    tc, _ = import_original(src, args.debug_checks)
    params = {k: v for k, v in flatten(nnx.state(model)).items()}
    omodel = original_model(tc, torch, params, spec)
    tic = time.perf_counter()
    theirs = run_original(tc, torch, omodel, spec, sentences, labels, vocab, candidates,
                          args.batch_size)
    theirs_s = time.perf_counter() - tic

  summary = compare(labels, ours.certified, ours_margin, ours_logit, *theirs)
  if unrounded is not None:
    summary = {**summary, **unrounded_summary(unrounded, theirs[1])}
  try:
    commit = subprocess.run(["git", "-C", str(args.original), "rev-parse", "HEAD"],
                            capture_output=True, text=True, check=True).stdout.strip() or None
  except Exception:  # noqa: BLE001  (not a git checkout: no commit recorded)
    commit = None
  run = Path(args.workdir).name
  meta = {"benchmark": "against_original", "run": args.workdir, "space": spec,
          "original_commit": commit, "ins_fix_applied": patched,
          "batch_size": args.batch_size, "torch": torch.__version__,
          "torch_threads": args.torch_threads,
          "seconds_arc_jax": round(ours_s, 2), "seconds_original": round(theirs_s, 2)}
  per = []
  counts = [space.count(s) for s in sentences]
  for i in range(len(labels)):
    ran = not np.isnan(theirs[2][i])
    per.append({"id": i, "label": int(labels[i]),
                "prediction_arc_jax": int(ours_logit[i] > 0),
                "prediction_original": int(theirs[2][i] > 0) if ran else None,
                "certified_arc_jax": bool(ours.certified[i]),
                "certified_original": bool(theirs[0][i]) if ran else None,
                "margin_lb_arc_jax": float(ours_margin[i]),
                "margin_lb_original": float(theirs[1][i]) if ran else None,
                "logit_arc_jax": float(ours_logit[i]),
                "logit_original": float(theirs[2][i]) if ran else None,
                "space_size": int(counts[i]),
                **({} if unrounded is None else
                   {"margin_lb_arc_jax_unrounded": float(unrounded[i])})})
  out = args.out or Path("results/benchmarks") / f"against_original_{run}_{space_tag(spec)}.json"
  out.parent.mkdir(parents=True, exist_ok=True)
  out.write_text(dump({**meta, "summary": summary, "sentences": per}))
  print(json.dumps({**meta, **summary, "file": str(out)}), flush=True)


if __name__ == "__main__":
  os.environ.setdefault("JAX_PLATFORMS", "cpu")
  main()
