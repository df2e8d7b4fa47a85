"""Certifies your own text with a trained or kept model: ``arc-certify --model RUN [--space SPEC]
[--labelled] [--output FILE] [FILE | -]``.

Reads one example per line of FILE (default ``-``, standard input) and writes one JSON line per
example: ``line``, ``tokens`` (as the model sees them: tokenised as its training data, words
without a vector dropped and listed in ``dropped``), ``label``, ``prediction``, ``certified``
(no member of S(x) changes the prediction away from the label), ``margin`` (a lower bound of
the label's logit minus every other over S(x); positive when certified) and ``space_size``
(|S(x)|, the number of application choices); ``--attack`` adds ``counterexample``, the
best-ranked misclassified string of HotFlip's beam in S(x) (null if none), ``--exact`` the
complete verifier's ``exact`` verdict (``robust``, ``not robust`` or ``unknown``, with its
``exact_counterexample``; LSTMs and Bi-LSTMs). Without ``--labelled`` the label is the model's
own prediction, so ``certified`` says the prediction is robust; with it each line is
``<label><TAB><text>``. Tree-LSTM lines are PTB trees (``(3 (2 a) (3 (3 good) (2 film)))``)
whose leaves must be in the model's vocabulary.

A kept model (``results/<run>``) needs no data folder and no network. Exit status 0; 2 with one
line naming the fix for a user error (no such run, a bad space or input line); 130 (143) on
Ctrl-C (SIGTERM). See arc_jax.certify and docs/DATA.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Iterable, TextIO

import numpy as np

from arc_jax.cli import common


def parse_args(argv=None) -> argparse.Namespace:
  parser = common.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("input", nargs="?", default="-",
                      help="file of sentences, one per line ('-': standard input)")
  parser.add_argument("--model", required=True, help="a run directory or kept model (results/...)")
  parser.add_argument("--space", help="perturbation space spec (default: the run's space)")
  parser.add_argument("--labelled", action="store_true",
                      help="each line is '<label><TAB><text>' (default: certify the prediction)")
  parser.add_argument("--attack", action="store_true",
                      help="add HotFlip's strongest counterexample in S(x) (beam --beam)")
  parser.add_argument("--beam", type=int, default=5, help="HotFlip beam width (default 5)")
  parser.add_argument("--exact", action="store_true",
                      help="add the complete verifier's verdict (LSTM and Bi-LSTM models)")
  parser.add_argument("--exact-max-nodes", type=int, default=4096,
                      help="sub-spaces the verifier certifies per sentence before 'unknown'")
  parser.add_argument("--batch-size", type=int, default=32, help="sentences per certified batch")
  parser.add_argument("--output", help="write the JSON lines here (default: standard output)")
  return parser.parse_args(argv)


class InputError(ValueError):
  """A line of the input cannot be read as an example of the model."""


def _split_label(line: str, number: int, labelled: bool) -> tuple[int | None, str]:
  if not labelled:
    return None, line
  label, tab, text = line.partition("\t")
  if not tab or not label.strip().lstrip("-").isdigit():
    raise InputError(f"line {number}: expected '<label><TAB><text>' (--labelled), got "
                     f"{line[:60]!r}; drop --labelled to certify the model's predictions.")
  return int(label), text


def read_examples(lines: Iterable[str], dataset: str, vocab, labelled: bool):
  """(examples as the model takes them, labels or None per example, dropped words per example)
  from raw input lines (blank lines skipped), tokenised as the run's ``dataset``."""
  from arc_jax.data import parse_tree, review_tokens, whitespace_tokens  # pylint: disable=import-outside-toplevel
  tokenize = review_tokens if dataset == "imdb" else whitespace_tokens
  examples, labels, dropped, numbers = [], [], [], []
  for number, line in enumerate(lines, start=1):
    line = line.rstrip("\r\n")
    if not line.strip():
      continue
    label, text = _split_label(line, number, labelled)
    if dataset == "sst_trees":
      try:
        tree = parse_tree(text)
      except ValueError as error:
        raise InputError(f"line {number}: not a PTB tree ({error}); a Tree-LSTM reads one "
                         "tree per line, e.g. '(3 (2 a) (3 (3 good) (2 film)))'.") from None
      unknown = sorted({w for w in tree.tokens if w not in vocab})
      if unknown:
        raise InputError(f"line {number}: the leaves {unknown[:5]} are not in the model's "
                         "vocabulary; a Tree-LSTM certifies trees of the words it has vectors "
                         "for.")
      examples.append(tree)
      dropped.append([])
    else:
      tokens = tokenize(text)
      examples.append(tuple(w for w in tokens if w in vocab))
      dropped.append([w for w in tokens if w not in vocab])
    labels.append(label)
    numbers.append(number)
  return examples, (labels if labelled else None), dropped, numbers


CHUNK = 1024
"""Sentences per :func:`arc_jax.certify` call: longer inputs show a progress bar over chunks."""


def certify_examples(model, space, vocab, examples, labels, batch_size: int) -> dict:
  """:func:`arc_jax.certify` of ``examples`` with ``labels``, or (None) with each example's own
  prediction as its label: certified with label 0, then, if any is predicted otherwise, all of
  them again with their predictions. Adds ``labels`` and ``predictions`` (n,) to its arrays.

  The second pass takes every example, not only those predicted otherwise: its batches are the
  first pass's (certify sorts and pads them by the examples alone), so it runs the programs the
  first compiled, where a subset would be padded to other shapes and compile again (seconds
  each on a CPU, against milliseconds to run one for a few sentences)."""
  from arc_jax.certify import certify  # pylint: disable=import-outside-toplevel
  from tqdm import tqdm  # pylint: disable=import-outside-toplevel

  def in_chunks(rows, row_labels):
    parts = [certify(model, space, rows[i:i + CHUNK], row_labels[i:i + CHUNK], vocab,
                     batch_size=batch_size)
             for i in tqdm(range(0, len(rows), CHUNK), desc="certify", unit="chunk",
                           disable=len(rows) <= CHUNK, file=sys.stderr)]
    return {key: np.concatenate([part[key] for part in parts]) for key in parts[0]}

  given = labels is not None
  results = in_chunks(examples, list(labels) if given else [0] * len(examples))
  predictions = np.argmax(results["clean_logits"], axis=-1)
  labels = np.asarray(labels, np.int32) if given else predictions.astype(np.int32)
  if not given and labels.any():
    results = in_chunks(examples, labels.tolist())
  return {**results, "labels": labels, "predictions": predictions}


def attack_examples(params, experiment, examples, labels, beam: int) -> list:
  """HotFlip's best-ranked misclassified member of S(x) per example (None where it finds none),
  as :mod:`arc_jax.metrics`' ``hf`` searches."""
  found = experiment.family.searches.hotflip(
      experiment.placed(params), experiment.space, experiment.builder, list(examples),
      np.asarray(labels), beam=beam, batch_size=experiment.config.eval_batch_size,
      progress=len(examples) > CHUNK)
  return list(found.counterexamples)


def verify_examples(params, experiment, examples, labels, max_nodes: int) -> list:
  """The complete verifier's verdict per sentence (:func:`arc_jax.verify.verify`)."""
  from arc_jax.verify import verify  # pylint: disable=import-outside-toplevel
  return list(verify(experiment.model(params), experiment.space, [tuple(x) for x in examples],
                     np.asarray(labels), experiment.data.vocab, max_nodes=max_nodes,
                     min_replacement_slots=experiment.builder.min_replacement_slots).verdicts)


def _least_margin(margins: np.ndarray, label: int) -> float:
  others = np.delete(margins, label)
  return float(others.min()) if len(others) else float("inf")


def _tokens(example) -> list[str]:
  return list(example.tokens) if hasattr(example, "tokens") else list(example)


def write_lines(out: TextIO, results: dict, examples, dropped, numbers, space) -> None:
  """One JSON line per example (see the module docstring)."""
  for i, example in enumerate(examples):
    label = int(results["labels"][i])
    row = {"line": numbers[i], "tokens": _tokens(example), "dropped": dropped[i], "label": label,
           "prediction": int(results["predictions"][i]),
           "certified": bool(results["certified"][i]),
           "margin": round(_least_margin(np.asarray(results["margins"][i]), label), 6),
           "space_size": int(space.count(example))}
    if "counterexamples" in results:
      found = results["counterexamples"][i]
      row["counterexample"] = None if found is None else _tokens(found)
    if "verdicts" in results:
      verdict = results["verdicts"][i]
      row["exact"] = verdict.status
      row["exact_counterexample"] = (None if verdict.counterexample is None
                                     else list(verdict.counterexample))
    out.write(json.dumps(row) + "\n")


def main(argv=None) -> int:
  args = parse_args(argv)
  common.start_jax()
  # pylint: disable=import-outside-toplevel  (JAX starts only when there is work: --help is fast)
  from arc_jax.evaluation import load_for_examples
  from arc_jax.train.interrupt import exit_on_signals
  try:
    with exit_on_signals("stopped; nothing was written."):
      params, experiment = load_for_examples(args.model, space=args.space)
      model, vocab, space = experiment.model(params), experiment.data.vocab, experiment.space
      source = sys.stdin if args.input == "-" else open(args.input, encoding="utf-8")
      with source:
        examples, labels, dropped, numbers = read_examples(
            source, experiment.config.dataset, vocab, args.labelled)
      if not examples:
        return common.error(f"{args.input} holds no sentences: give one per line.")
      if args.exact and experiment.config.model != "lstm":
        raise InputError(f"--exact supports LSTM and Bi-LSTM models, not "
                         f"{experiment.config.model!r} ones: drop --exact.")
      results = certify_examples(model, space, vocab, examples, labels, args.batch_size)
      if args.attack:
        results["counterexamples"] = attack_examples(params, experiment, examples,
                                                     results["labels"], args.beam)
      if args.exact:
        results["verdicts"] = verify_examples(params, experiment, examples, results["labels"],
                                              args.exact_max_nodes)
      if args.output is None:
        write_lines(sys.stdout, results, examples, dropped, numbers, space)
      else:
        with open(args.output, "w", encoding="utf-8") as handle:
          write_lines(handle, results, examples, dropped, numbers, space)
  except (*common.user_errors(), InputError, OSError, ValueError) as error:
    return common.error(error)
  return 0


def run() -> None:
  """The ``arc-certify`` console script."""
  sys.exit(main())


if __name__ == "__main__":
  run()
