"""The paper's reported numbers (shared/paper/arc-emnlp2021.tex), in percent, by table.

Keys name what each number measures; the values are copied from the LaTeX tables and, for the
δ figure and the POPQORN comparison (whose figure files are not in the source), from the text.
Tables 2 and 3 are ``experiments/report.py``'s ``PAPER`` (model, method, space key) →
(Acc, HF Acc, CF Acc, EX Acc).
"""

from arc_jax.cli.report import PAPER as TABLES_2_3  # noqa: F401  (re-exported: one copy of those numbers)

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
