"""The paper (shared/paper/arc-emnlp2021.tex) as one table: its SST-2 spaces, its reported numbers
(percent, by table) and the reproduction cells that measure each of them.

The numbers are copied from the LaTeX tables and, for the δ figure and the POPQORN comparison
(whose figure files are not in the source), from the text. ``TABLES_2_3`` maps (model, method,
space key) → (Acc, HF Acc, CF Acc, EX Acc); ``arc-report --paper experiments/paper.py`` (which
``experiments/report.py`` passes by default) prints it beside the measured numbers. Every number
is a :class:`Cell` (:func:`cells`): a table, a row, a column, the training run that makes its
model (``experiments/configs/``) and the evaluations that measure it; ``experiments/reproduce.py``
works through them.
"""

from __future__ import annotations

import dataclasses
import re

from arc_jax.cli.report import space_key
from arc_jax.configs import PAPER_SPACES  # experiments/configs/paper_rows.py

SPACES = {key: spec for key, spec in PAPER_SPACES.items() if key != "review"}
REVIEW = PAPER_SPACES["review"]

_DEL_SUB, _SUB_INS, _DEL_INS = "Del2Sub2", "Ins2Sub2", "Del2Ins2"
_REVIEW = "Sub2Trans11Trans21Trans31Trans41"
TABLES_2_3 = {
    # (model, method, space key): (Acc, HF Acc, CF Acc, EX Acc), the paper's Tables 2 and 3.
    ("lstm", "normal", _DEL_SUB): (84.6, 71.9, 4.6, 68.9),
    ("lstm", "normal", _SUB_INS): (84.6, 64.0, 0.5, 55.1),
    ("lstm", "normal", _DEL_INS): (84.6, 73.7, 1.2, 65.2),
    ("lstm", "augment", _DEL_SUB): (84.0, 77.0, 5.5, 74.4),
    ("lstm", "augment", _SUB_INS): (84.7, 70.2, 0.3, 61.5),
    ("lstm", "augment", _DEL_INS): (84.5, 75.4, 0.4, 68.3),
    ("lstm", "hotflip", _DEL_SUB): (84.0, 78.7, 4.3, 74.6),
    ("lstm", "hotflip", _SUB_INS): (82.5, 75.9, 0.0, 62.0),
    ("lstm", "hotflip", _DEL_INS): (84.4, 80.6, 0.0, 68.7),
    ("lstm", "arc", _DEL_SUB): (82.5, 77.8, 72.5, 77.0),
    ("lstm", "arc", _SUB_INS): (80.2, 70.0, 55.4, 64.0),
    ("lstm", "arc", _DEL_INS): (82.6, 78.6, 69.4, 74.6),
    ("tree", "normal", _DEL_SUB): (50.3, 39.9, 4.1, 33.8),
    ("tree", "normal", _SUB_INS): (50.3, 33.4, 0.0, 17.9),
    ("tree", "normal", _DEL_INS): (50.3, 40.1, 0.0, 25.7),
    ("tree", "augment", _DEL_SUB): (47.5, 40.8, 1.4, 36.4),
    ("tree", "augment", _SUB_INS): (48.1, 37.1, 0.0, 23.0),
    ("tree", "augment", _DEL_INS): (47.6, 40.6, 0.0, 29.0),
    ("tree", "hotflip", _DEL_SUB): (49.5, 43.4, 1.6, 38.4),
    ("tree", "hotflip", _SUB_INS): (48.7, 39.5, 0.0, 29.0),
    ("tree", "hotflip", _DEL_INS): (49.5, 42.7, 0.0, 32.1),
    ("tree", "arc", _DEL_SUB): (46.4, 43.4, 30.9, 41.9),
    ("tree", "arc", _SUB_INS): (46.1, 39.0, 17.1, 37.6),
    ("tree", "arc", _DEL_INS): (46.5, 43.8, 19.2, 40.0),
    ("bilstm", "normal", _DEL_SUB): (83.0, 71.1, 8.2, 68.0),
    ("bilstm", "normal", _SUB_INS): (83.0, 63.4, 2.1, 56.1),
    ("bilstm", "normal", _DEL_INS): (83.0, 72.5, 6.4, 65.5),
    ("bilstm", "augment", _DEL_SUB): (83.2, 75.1, 8.7, 72.9),
    ("bilstm", "augment", _SUB_INS): (83.5, 66.8, 1.3, 59.1),
    ("bilstm", "augment", _DEL_INS): (84.6, 75.0, 4.6, 68.6),
    ("bilstm", "hotflip", _DEL_SUB): (83.6, 79.2, 9.2, 73.4),
    ("bilstm", "hotflip", _SUB_INS): (82.8, 76.6, 0.1, 55.5),
    ("bilstm", "hotflip", _DEL_INS): (83.5, 79.1, 0.0, 55.7),
    ("bilstm", "arc", _DEL_SUB): (83.5, 78.7, 70.9, 77.5),
    ("bilstm", "arc", _SUB_INS): (80.2, 71.4, 59.8, 66.4),
    ("bilstm", "arc", _DEL_INS): (82.6, 76.2, 66.2, 71.8),
    ("lstm", "normal", _REVIEW): (83.9, 72.4, 21.0, 71.0),
    ("lstm", "augment", _REVIEW): (79.2, 72.5, 30.5, 71.7),
    ("lstm", "hotflip", _REVIEW): (79.6, 74.3, 34.5, 72.9),
    ("lstm", "arc", _REVIEW): (82.3, 78.1, 74.2, 77.1),
    # ARC-A3T (appendix table "different instantiations of ARC-A3T"; no HF column there).
    ("lstm", "arc_a3t(Del)", _DEL_SUB): (83.2, None, 15.1, 68.6),
    ("lstm", "arc_a3t(Sub)", _DEL_SUB): (81.4, None, 71.1, 75.8),
    ("lstm", "arc_a3t(Ins)", _SUB_INS): (82.6, None, 15.9, 66.7),
    ("lstm", "arc_a3t(Sub)", _SUB_INS): (83.0, None, 48.8, 65.4),
}

TABLE_4_A3T = {
    # tab:compare_a3twhole, "A3T (HotFlip)" CNN rows: (Acc, HF, CF, EX); CF N/A.
    "Del2Sub2": (80.2, 71.9, None, 70.2),
    "Ins2Sub2": (79.9, 68.3, None, 57.7),
}

TABLE_5_IMDB = {
    # tab:compare_jia, ARC row: (Acc, CF, EX) of the Bi-LSTM on IMDB.
    "Sub1": (87.7, 77.8, 82.6),
    "Sub2": (86.3, 71.0, 78.2),
}

SUB3_HUANG = (83.3, 78.3, 73.3, 77.9)
"""tab:compare_huang, ARC LSTM on SST-2 test under [(Sub,3)]: (Acc, HF, CF, EX)."""

SUB3_FIRST_100_CF = {"arc": 67.0, "normal": 5.0}
"""Comparison to POPQORN (text): CF Acc on the first 100 SST-2 test sentences, [(Sub,3)]."""

ARC_A3T = {
    # tab:arc_a3t: (Acc, CF, EX) per instantiation and space.
    ("abs_first", "Del2Sub2"): (83.2, 15.1, 68.6),
    ("abs_second", "Del2Sub2"): (81.4, 71.1, 75.8),
    ("arc", "Del2Sub2"): (82.5, 72.5, 77.0),
    ("abs_first", "Ins2Sub2"): (82.6, 15.9, 66.7),
    ("abs_second", "Ins2Sub2"): (83.0, 48.8, 65.4),
    ("arc", "Ins2Sub2"): (80.2, 55.4, 64.0),
}

DELTA_FIGURE_TEXT = {
    # fig:RQ3 (text of its section): the ARC [(Ins,2),(Sub,2)] LSTM under [(Ins,δ),(Sub,δ)].
    "cf_at_delta_5": 41.7,
    "max_space_size_at_delta_5": 1e10,  # "about 10^10"
    "ex_minus_cf_mean_delta_1_3": 8.2,
    "hf_minus_ex_mean_delta_1_3": 5.6,
}


@dataclasses.dataclass(frozen=True)
class Run:
  """One training run: ``experiments/train.py --config CONFIG OVERRIDES``.

  ``minutes``: estimated training time on the machine it is meant for (the 2-core CPU, or one
  GPU when ``gpu``), from the runs measured so far (experiments/README.md, results/README.md).
  """
  name: str
  config: str
  overrides: tuple[str, ...] = ()
  gpu: bool = False
  minutes: float = 10


@dataclasses.dataclass(frozen=True)
class Evaluation:
  """One ``experiments/evaluate.py`` call on a run's export; done when a results file of the
  run holds these metrics for this split, space, lexicon and example count."""
  run: Run
  space: str
  metrics: tuple[str, ...]
  max_candidates: int | None = None  # None: the run's lexicon
  first: int | None = None  # the first N test examples
  minutes: float = 3

  def args(self) -> list[str]:
    args = ["--space", self.space, "--metrics", ",".join(self.metrics), "--no-progress"]
    if self.max_candidates is not None:
      args += ["--max-candidates", str(self.max_candidates)]
    if self.first is not None:
      args += ["--first", str(self.first)]
    return args


@dataclasses.dataclass(frozen=True)
class Cell:
  """A number the paper reports: ``table``/``row``/``column``, measured by ``evaluations``;
  ``paper`` maps metric names to the paper's values (percent)."""
  table: str
  row: str
  column: str
  evaluations: tuple[Evaluation, ...]
  paper: dict[str, float | None]
  ex_by_verifier: bool = False
  """EX is the complete verifier's exact robust accuracy (``exact``) where it left no example
  unknown: the same number by definition, without enumerating S(x)."""

  @property
  def id(self) -> str:
    """``table/row/column`` in lower case, a space by its key: ``table_2/lstm_normal/del2sub2``."""
    column = space_key(self.column) if self.column.startswith("[") else self.column
    return "/".join(re.sub(r"\W+", "_", p).strip("_").lower() for p in (self.table, self.row,
                                                                        column))


ARCHS = {"lstm": "LSTM", "bilstm": "Bi-LSTM", "tree": "Tree-LSTM"}
METHODS = {"normal": "Normal", "augment": "Data Aug.", "hotflip": "HotFlip", "arc": "ARC"}
# Estimated minutes, measured on the 2-core CPU shared with other jobs: an evaluation under
# [(Del,2),(Sub,2)] takes 1-3 (EX enumerates 300k strings of a Normal model); under
# [(Sub,2),(Ins,2)] EX enumerated 5.2M strings of the Normal LSTM in 38 min. Training runs:
# Normal LSTM 2-4 (CPU), data augmentation LSTM 6, Bi-LSTM 8, HotFlip LSTM about 12 (8 epochs of
# 85 s), ARC LSTM 104 on the CPU, tree data augmentation 20 (CPU), ARC tree 4 on a GPU (30 epochs
# of 5-7 s); on one H200 running three ARC rows at once with --dp-shapes 4: ARC LSTM [(Sub,3)] 7,
# ARC Bi-LSTM [(Del,2),(Ins,2)] about 12, ARC LSTM S_review about 20 (epochs of 44-58 s).
# Guesses, not measured yet: IMDB on a GPU, HotFlip Bi-LSTM.
TRAIN_MINUTES = {("lstm", "normal"): 4, ("bilstm", "normal"): 6, ("lstm", "augment"): 8,
                 ("bilstm", "augment"): 12, ("lstm", "hotflip"): 15, ("bilstm", "hotflip"): 25,
                 ("lstm", "arc"): 20, ("bilstm", "arc"): 30, ("tree", "normal"): 40,
                 ("tree", "augment"): 25, ("tree", "hotflip"): 60, ("tree", "arc"): 10}


def table2_run(arch: str, method: str, space: str) -> Run:
  minutes = TRAIN_MINUTES[arch, method]
  if arch == "tree":
    arg = "normal" if method == "normal" else f"{method},{space}"
    name = "normal_tree" if method == "normal" else f"{method}_tree_{space}"
    return Run(name, f"tree.py:{arg}", gpu=method == "arc", minutes=minutes)
  if method == "normal":
    return Run(f"normal_{arch}", f"normal.py:{arch}", minutes=minutes)
  return Run(f"{method}_{arch}_{space}", f"{method}.py:{arch},{space}", gpu=method == "arc",
             minutes=minutes)


def lstm_evaluations(run: Run, space: str, *, max_candidates=None, minutes=3, ex=True,
                     hf=True) -> tuple[Evaluation, ...]:
  metrics = ("acc", "cf") + (("ex",) if ex else ()) + (("hf",) if hf else ())
  return (Evaluation(run, space, metrics, max_candidates=max_candidates, minutes=minutes),)


# EX of a Tree-LSTM on an Ins space, beside other jobs, before leaf states were computed once per
# distinct word (1.5x EX): Normal 93 / 74 min ([(Sub,2),(Ins,2)] / [(Del,2),(Ins,2)]), Data Aug.
# 87 / 53, HotFlip about 140 / 117 (its robust trees, whose spaces are enumerated to the end, are
# the most; ARC certifies part of its robust ones, so it is guessed between); [(Del,2),(Sub,2)]
# 4-12 min.
TREE_EX_INS_MINUTES = {"normal": 60, "augment": 50, "hotflip": 90, "arc": 70}


def tree_evaluations(run: Run, method: str, space: str) -> tuple[Evaluation, ...]:
  minutes = TREE_EX_INS_MINUTES[method] if "Ins" in space else 8
  return (Evaluation(run, space, ("acc", "cf", "ex"), minutes=minutes),
          Evaluation(run, space, ("hf",), minutes=10))


def _paper4(values) -> dict[str, float | None]:
  return dict(zip(("acc", "hf", "cf", "ex"), values)) if values else {}


def cells() -> list[Cell]:
  """Every cell of the paper's evaluation, cheapest training first within each table."""
  out = []
  for arch in ("lstm", "bilstm", "tree"):  # Table 2
    for method in ("normal", "augment", "hotflip", "arc"):
      for space_arg, space in SPACES.items():
        run = table2_run(arch, method, space_arg)
        evaluations = (tree_evaluations(run, method, space) if arch == "tree" else
                       lstm_evaluations(run, space, minutes=40 if "Ins" in space else 3))
        out.append(Cell("Table 2", f"{ARCHS[arch]} {METHODS[method]}", space, evaluations,
                        _paper4(TABLES_2_3.get((arch, method, space_key(space))))))
  for method in ("normal", "augment", "hotflip", "arc"):  # Table 3, S_review
    run = (table2_run("lstm", "normal", "") if method == "normal" else
           Run(f"{method}_lstm_review", f"{method}.py:lstm,review", gpu=method == "arc",
               minutes=3 * TRAIN_MINUTES["lstm", method]))
    paper_row = _paper4(TABLES_2_3[("lstm", method, space_key(REVIEW))])
    out.append(Cell("Table 3", f"LSTM {METHODS[method]}", "S_review",
                    lstm_evaluations(run, REVIEW, max_candidates=0, minutes=10), paper_row))
    if method != "arc":  # the original evaluated its baselines with one candidate per word
      out.append(Cell("Table 3", f"LSTM {METHODS[method]}, 1 candidate per word (the paper's "
                      "protocol)",
                      "S_review", lstm_evaluations(run, REVIEW, max_candidates=1, minutes=5),
                      paper_row))
  # Table 4: A3T beside the ARC LSTM. The paper trained A3T on A3T's CNN (the first row, on CPU:
  # about 4.5 minutes an epoch here); the same A3T on ARC's LSTM is an extra row (its certified
  # part runs ARC's DP: a GPU run like ARC's).
  for space_arg in ("del2sub2", "sub2ins2"):
    space = SPACES[space_arg]
    a3t_cnn = Run(f"a3t_cnn_{space_arg}", f"a3t_cnn.py:{space_arg}", minutes=120)
    out.append(Cell("Table 4", "A3T (HotFlip) CNN", space, lstm_evaluations(a3t_cnn, space),
                    _paper4(TABLE_4_A3T[space_key(space)])))
    a3t = Run(f"a3t_lstm_{space_arg}", f"a3t.py:{space_arg}", gpu=True, minutes=20)
    out.append(Cell("Table 4", "A3T (HotFlip) LSTM (extra row)", space,
                    lstm_evaluations(a3t, space), _paper4(TABLE_4_A3T[space_key(space)])))
    arc = table2_run("lstm", "arc", space_arg)
    out.append(Cell("Table 4", "ARC LSTM", space, lstm_evaluations(arc, space),
                    _paper4(TABLES_2_3[("lstm", "arc", space_key(space))])))
  for sub in ("sub1", "sub2"):  # Table 5: IMDB
    run = Run(f"arc_imdb_bilstm_{sub}", f"imdb.py:{sub}", gpu=True, minutes=90)
    space = f"[(Sub,{sub[-1]})]"
    out.append(Cell("Table 5", "IMDB Bi-LSTM ARC", space,
                    lstm_evaluations(run, space, minutes=60, hf=False),
                    dict(zip(("acc", "cf", "ex"), TABLE_5_IMDB[space_key(space)]))))
  arc_ins = table2_run("lstm", "arc", "sub2ins2")  # the δ figure
  for delta in range(1, 6):
    space = f"[(Ins,{delta}),(Sub,{delta})]"
    # EX by enumeration for δ ≤ 2; at δ = 3 (7.8M strings for the longest sentence, about four
    # hours here) the complete verifier's exact robustness, which is EX when nothing is unknown
    evaluations = lstm_evaluations(arc_ins, space, ex=delta <= 2,
                                   minutes={1: 5, 2: 40, 3: 15, 4: 15, 5: 20}[delta])
    evaluations += (Evaluation(arc_ins, space, ("exact",), minutes=4 * delta),)
    cf = DELTA_FIGURE_TEXT["cf_at_delta_5"] if delta == 5 else None
    out.append(Cell("δ figure", "ARC LSTM [(Ins,2),(Sub,2)]", f"δ={delta}", evaluations,
                    {"cf": cf} if cf else {}, ex_by_verifier=delta == 3))
  sub3 = Run("arc_lstm_sub3", "arc.py:lstm,del2sub2",  # [(Sub,3)]: λ_max 0.8 (paper appendix)
             ("--config.space=[(Sub,3)]", "--config.lambda_max=0.8", "--config.name=arc_lstm_sub3"),
             gpu=True, minutes=20)
  out.append(Cell("[(Sub,3)]", "ARC LSTM (vs Huang et al.)", "test",
                  lstm_evaluations(sub3, "[(Sub,3)]", minutes=10), _paper4(SUB3_HUANG)))
  for method, run in (("arc", sub3), ("normal", table2_run("lstm", "normal", ""))):
    out.append(Cell("[(Sub,3)]", f"LSTM {METHODS[method]} (vs POPQORN)", "first 100",
                    (Evaluation(run, "[(Sub,3)]", ("acc", "cf"), first=100, minutes=1),),
                    {"cf": SUB3_FIRST_100_CF[method]}))
  for space_arg, first in (("del2sub2", "Del"), ("sub2ins2", "Ins")):  # ARC-A3T
    space = SPACES[space_arg]
    models = {"arc": table2_run("lstm", "arc", space_arg)}
    for part, abstracted in (("first", first), ("second", "Sub")):
      models[f"abs_{part}"] = Run(f"arc_a3t_lstm_{space_arg}_abs_{abstracted.lower()}",
                                  f"arc_a3t.py:{space_arg},{part}", gpu=True, minutes=20)
    for label, run in models.items():
      values = ARC_A3T[(label, space_key(space))]
      out.append(Cell("ARC-A3T table", f"LSTM {label}", space,
                      lstm_evaluations(run, space, hf=False),
                      dict(zip(("acc", "cf", "ex"), values))))
      for delta in (1, 3):  # the ARC-A3T figures: δ = 1..3 (δ = 2 is the table's column)
        family = f"[({first},{delta}),(Sub,{delta})]"
        evaluations = (Evaluation(run, family, ("acc", "cf", "ex"), minutes=3),)
        if delta == 3:  # EX from the complete verifier, as in the δ figure
          evaluations = (Evaluation(run, family, ("acc", "cf"), minutes=3),
                         Evaluation(run, family, ("exact",), minutes=12))
        out.append(Cell("ARC-A3T figures", f"LSTM {label}", family, evaluations, {},
                        ex_by_verifier=delta == 3))
  return out
