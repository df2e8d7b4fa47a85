"""ARC-A3T on SST-2 (paper appendix, Table "different instantiations of ARC-A3T"): the LSTM trained
with one part of the space abstracted by the DP and the rest augmented by enumeration.

``--config experiments/configs/arc_a3t.py:SPACE,PART``: SPACE ``del2sub2`` ({(Del,2),(Sub,2)}) or
``sub2ins2`` ({(Ins,2),(Sub,2)}); PART ``first`` (Abs-fir: abstract Del / Ins, augment Sub) or
``second`` (Abs-sec: abstract Sub, augment Del / Ins). The table's third row, abstracting all,
is ARC itself (``arc.py:lstm,del2sub2`` and ``arc.py:lstm,sub2ins2``). Each example trains on x
and the 2 members of the augmented space with the highest loss (the original's
``--eaugment-by 2``); λ_max as the ARC row of the same space; the best epoch by dev certified
accuracy under the whole space. Evaluating each run under δ = 1..3 gives the two δ figures
(``experiments/arc_a3t_delta.py``).
"""

from arc_jax.configs import sst2_row_config
from arc_jax.train.config import ConfigError

FIRST = {"del2sub2": "Del", "sub2ins2": "Ins"}
LAMBDA_MAX = {"del2sub2": 0.5, "sub2ins2": 0.6}


def get_config(arg: str = "del2sub2,first"):
  space, _, part = arg.partition(",")
  if space not in FIRST or part not in ("first", "second"):
    raise ConfigError(f"No arc_a3t row {arg!r}; choose one of: del2sub2,first, del2sub2,second, "
                      "sub2ins2,first, sub2ins2,second.")
  c = sst2_row_config("arc_a3t", f"lstm,{space}")
  c.augmented.abstracted = FIRST[space] if part == "first" else "Sub"
  c.name = f"arc_a3t_lstm_{space}_abs_{c.augmented.abstracted.lower()}"
  c.augmented.augment_search = "enumerate"
  c.augmented.augment_members = 2
  c.lambda_max = LAMBDA_MAX[space]
  return c
