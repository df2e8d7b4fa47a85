"""The results quoted in the README and docs/HOW_IT_WORKS.md are the committed evaluation files'.

Each table row names its kept run (or, for the δ table, its δ); every cell is compared with the
rate of the matching metric, rounded as the tables round (one decimal of a percentage), so a
retrained model or an edited number fails here until the other side follows.
"""

import json
import pathlib
import re

import pytest

from arc_jax import per_example, stats

ROOT = pathlib.Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"


def _space_key(spec):
  """A space spec as the set of its (transformation, budget) pairs: the order does not matter."""
  return frozenset(re.findall(r"\((\w+),(\d+)\)", spec))


def _evaluations(run, spec):
  """The run's committed test-set evaluations (whole split) of the space ``spec``."""
  for path in sorted((RESULTS / run / "eval").glob("test_*.json")):
    record = json.loads(path.read_text())
    if record.get("first") is None and _space_key(record["space"]) == _space_key(spec):
      yield record


def _rates(run, spec):
  """{metric: (percentage rounded to 0.1, metric record)} over the run's evaluations of ``spec``;
  a metric measured twice must agree."""
  rates = {}
  for record in _evaluations(run, spec):
    for name, metric in record["metrics"].items():
      rate = (round(100 * metric["value"], 1), metric)
      assert rates.setdefault(name, rate)[0] == rate[0], (run, spec, name)
  return rates


def _table_rows(text, header_start):
  """The body rows of the markdown table whose header line starts with ``header_start``, as cell
  lists."""
  lines = text[text.index(header_start):].splitlines()
  rows = []
  for line in lines[2:]:
    if not line.startswith("|"):
      break
    rows.append([cell.strip() for cell in line.strip("|").split("|")])
  return rows


def test_readme_results_table_matches_the_kept_runs():
  rows = _table_rows((ROOT / "README.md").read_text(), "| SST-2 test, `[(Del,2),(Sub,2)]`, LSTM")
  assert len(rows) == 3
  for row in rows:
    run = re.search(r"results/([a-z0-9_]+)", row[0]).group(1)
    rates = _rates(run, "[(Del,2),(Sub,2)]")
    for cell, metric in zip(row[1:5], ("acc", "hf", "cf", "ex")):
      assert float(cell) == rates[metric][0], (run, metric, cell, rates[metric][0])


def test_delta_table_matches_the_verifier_runs():
  text = (ROOT / "docs" / "HOW_IT_WORKS.md").read_text()
  rows = _table_rows(text, "| δ | largest")
  assert [row[0] for row in rows] == ["1", "2", "3", "4", "5"]
  for row in rows:
    delta = int(row[0])
    spec = f"[(Ins,{delta}),(Sub,{delta})]"
    rates = _rates("arc_lstm_sub2ins2", spec)
    largest = max(record["space_size"]["max"] for record in _evaluations("arc_lstm_sub2ins2", spec))
    assert int(row[1].replace(",", "")) == largest
    for cell, metric in zip(row[2:7], ("acc", "hf", "cf", "ex", "exact")):
      if not cell:
        # A blank is a metric not measured at this δ; EX is never run beyond δ = 2.
        assert metric not in rates, (delta, metric)
        continue
      assert float(cell.split()[0]) == rates[metric][0], (delta, metric, cell)
    exact = rates["exact"][1]
    assert int(row[7]) == exact["unknowns"]
    if exact["unknowns"]:  # the upper end counts every unknown as robust
      upper = round(100 * (exact["count"] + exact["unknowns"]) / exact["total"], 1)
      assert f"(≤ {upper})" in row[6]
    assert int(row[8].rstrip(" s").replace(",", "")) == round(exact["seconds"])


ORDINARY_RUNS = {"Normal LSTM": "normal_lstm", "Normal Bi-LSTM": "normal_bilstm"}


def test_exact_table_of_ordinary_models_matches_the_verifier_runs():
  """docs/HOW_IT_WORKS.md's exact robustness of the Normal LSTM (δ = 1..5 on both spaces) and
  Bi-LSTM (δ = 3), the rows done so far: each cell is its committed evaluation's, which has its
  per-example file."""
  rows = _table_rows((ROOT / "docs" / "HOW_IT_WORKS.md").read_text(), "| model | space | δ |")
  listed = {(row[0], row[1].strip("`")) for row in rows}
  planned = {*(("Normal LSTM", f"[({kind},{d}),(Sub,{d})]") for kind in ("Del", "Ins")
               for d in range(1, 6)),
             *(("Normal Bi-LSTM", f"[({kind},3),(Sub,3)]") for kind in ("Del", "Ins"))}
  assert {("Normal LSTM", f"[({kind},{d}),(Sub,{d})]") for kind in ("Del", "Ins")
          for d in range(1, 3)} <= listed <= planned
  committed = {(label, spec) for label, spec in planned
               if any(set(r["metrics"]) == {"acc", "cf", "exact"}
                      for r in _evaluations(ORDINARY_RUNS[label], spec))}
  assert listed == committed  # a finished evaluation is in the table
  for row in rows:
    run, spec = ORDINARY_RUNS[row[0]], row[1].strip("`")
    assert int(row[2]) == int(re.search(r"(\d+)\)\]$", spec).group(1))
    records = [r for r in _evaluations(run, spec) if set(r["metrics"]) == {"acc", "cf", "exact"}]
    assert len(records) == 1, (run, spec)
    record = records[0]
    assert int(row[3].replace(",", "")) == record["space_size"]["max"]
    for cell, metric in zip(row[4:7], ("acc", "cf", "exact")):
      assert float(cell.split()[0]) == round(100 * record["metrics"][metric]["value"], 1)
    exact = record["metrics"]["exact"]
    assert int(row[7]) == exact["unknowns"]
    if exact["unknowns"]:
      upper = round(100 * (exact["count"] + exact["unknowns"]) / exact["total"], 1)
      assert f"(≤ {upper})" in row[6]
    assert int(row[8].rstrip(" s").replace(",", "")) == round(exact["seconds"])
    assert per_example.read(RESULTS / run / "eval" / record["per_example_file"])["exact"]


@pytest.mark.parametrize("delta", [3, 4, 5])
def test_no_enumeration_beyond_delta_two(delta):
  """The docs say EX is not run from δ = 3 on; the committed files agree."""
  assert "ex" not in _rates("arc_lstm_sub2ins2", f"[(Ins,{delta}),(Sub,{delta})]")


def test_against_original_table_matches_its_json():
  rows = _table_rows((ROOT / "docs" / "HOW_IT_WORKS.md").read_text(),
                     "| kept model, space | certified by both")
  runs = {"ARC LSTM": {"[(Del,2),(Sub,2)]": "arc_lstm_del2sub2", "[(Sub,2),(Ins,2)]":
                       "arc_lstm_sub2ins2", "[(Del,2),(Ins,2)]": "arc_lstm_del2ins2"},
          "Normal LSTM": dict.fromkeys(("[(Del,2),(Sub,2)]", "[(Sub,2),(Ins,2)]",
                                        "[(Del,2),(Ins,2)]"), "normal_lstm")}
  assert len(rows) == 6
  for row in rows:
    kind, spec = (part.strip(" `") for part in row[0].split(",", 1))
    files = [p for p in (RESULTS / "benchmarks").glob("against_original_*.json")
             if json.loads(p.read_text())["run"] == f"results/{runs[kind][spec]}"
             and _space_key(json.loads(p.read_text())["space"]) == _space_key(spec)]
    assert len(files) == 1, row
    summary = json.loads(files[0].read_text())["summary"]
    assert summary["compared"] == 1821 and not summary["prediction_differs"]
    assert [int(c.replace(",", "")) for c in row[1:4]] == [
        summary["certified_both"], summary["certified_only_arc_jax"],
        summary["certified_only_original"]], row


def test_results_readme_cites_the_original_dp_on_the_normal_lstm():
  """results/README.md's explanation of the baselines' higher CF quotes the against-original
  measurement on the Normal LSTM; its counts and rates are those of the committed JSON."""
  text = " ".join((RESULTS / "README.md").read_text().split())
  found = re.search(r"the original's DP certifies (\d+) of ([\d,]+) test sentences \((\d+\.\d)%, "
                    r"near the paper's [\d.]+\) and ours (\d+) \((\d+\.\d)%\), every one of the "
                    r"(\d+) among them", text)
  assert found, "the bullet 'CF Acc of the baselines is higher' lost its measurement"
  summary = json.loads((RESULTS / "benchmarks" / "against_original_normal_lstm_del2sub2.json")
                       .read_text())["summary"]
  n = summary["compared"]
  assert (int(found[1]), int(found[2].replace(",", "")), int(found[4]), int(found[6])) == (
      summary["certified_original"], n, summary["certified_arc_jax"], summary["certified_both"])
  assert summary["certified_only_original"] == 0
  assert (float(found[3]), float(found[5])) == (round(100 * summary["certified_original"] / n, 1),
                                                round(100 * summary["certified_arc_jax"] / n, 1))


# results/README.md's generated tables: every rate with its Wilson interval, the paired McNemar
# table; both recomputed here from the committed files with arc_jax.stats alone.

_RATE = re.compile(r"^(\d+\.\d) \[(\d+\.\d), (\d+\.\d)\]")
_REVIEW = "[(Trans1,1),(Trans2,1),(Trans3,1),(Trans4,1),(Sub,2)]"


def _generated():
  text = (RESULTS / "README.md").read_text()
  return text.split("<!-- reproduce.py: generated tables begin -->", 1)[1].split(
      "<!-- reproduce.py: generated tables end -->", 1)[0]


def _generated_tables():
  """(table name, header cells, body rows) of each generated table with a ``| row |`` header."""
  sections = re.split(r"^### ", _generated(), flags=re.M)[1:]
  for section in sections:
    name = section.splitlines()[0]
    if "\n| row | space | run |" not in section:
      continue
    header = [c.strip() for c in section[section.index("| row |"):].splitlines()[0].strip(
        "|").split("|")]
    yield name, header, _table_rows(section, "| row |")


def _where(table, row, column):
  """(space key, first, max_candidates or None for any) of a generated row's evaluations."""
  if column.startswith("["):
    return _space_key(column), None, None
  if column.startswith("δ="):
    delta = column[2:]
    return _space_key(f"[(Ins,{delta}),(Sub,{delta})]"), None, None
  if column == "S_review":
    return _space_key(_REVIEW), None, 1 if "1 candidate per word" in row else 0
  assert table == "[(Sub,3)]", (table, column)
  return _space_key("[(Sub,3)]"), 100 if column == "first 100" else None, None


def _records(run, where):
  key, first, max_candidates = where
  paths = sorted((RESULTS / run).glob("eval/*.json")) + sorted((RESULTS / run).glob("test_*.json"))
  for path in paths:
    record = json.loads(path.read_text())
    if (isinstance(record, dict) and "metrics" in record and record["split"] == "test"
        and _space_key(record["space"]) == key and record.get("first") == first
        and max_candidates in (None, record.get("max_candidates"))):
      yield record


def _interval_text(metric):
  lo, hi = stats.wilson_interval(metric["count"], metric["total"])
  return (f"{100 * metric['value']:.1f}", f"{100 * lo:.1f}", f"{100 * hi:.1f}")


def test_every_rate_in_the_results_readme_carries_its_wilson_interval():
  checked = 0
  columns = {"Acc": "acc", "HF": "hf", "CF": "cf", "EX": "ex", "exact (≤ with unknowns)": "exact"}
  for table, header, rows in _generated_tables():
    for row in rows:
      if "mean ± sd" in row[0]:
        continue  # a mean over seeds: tests/test_readme_uncertainty.py
      run = row[2].split()[0]
      records = list(_records(run, _where(table, row[0], row[1].strip("`"))))
      for name, metric in columns.items():
        if name not in header:
          continue
        cell = row[header.index(name)]
        if cell.startswith("–"):
          continue  # not measured (or, for EX, not enumerated): no rate
        match = _RATE.match(cell)
        assert match, f"no interval: {table} / {row[0]} / {row[1]} / {name}: {cell!r}"
        found = [r["metrics"][metric] for r in records if metric in r["metrics"]]
        if not found and metric == "ex":  # EX from the complete verifier, nothing unknown
          found = [r["metrics"]["exact"] for r in records
                   if r["metrics"].get("exact", {}).get("unknowns") == 0]
        assert match.groups() in [_interval_text(m) for m in found], (
            table, row[0], row[1], name, cell, [_interval_text(m) for m in found])
        checked += 1
  assert checked > 250  # every done cell of every table


def _paired_rows():
  section = _generated().split("### ARC against each baseline, paired", 1)[1]
  return _table_rows(section, "| table | space | metric |")


def test_paired_table_matches_mcnemar_on_the_committed_per_example_tables():
  rows = _paired_rows()
  tested = 0
  for table, _space, metric, arc_file, against, other_file, b, c, p in rows:
    paths = [RESULTS / name.strip("`") for name in (arc_file, other_file)]
    records = [json.loads(path.read_text()) for path in paths]
    assert records[0]["split"] == records[1]["split"] == "test", (table, against)
    assert _space_key(records[0]["space"]) == _space_key(records[1]["space"]), (table, against)
    assert records[0].get("first") == records[1].get("first"), (table, against)
    run = paths[0].relative_to(RESULTS).parts[0]
    assert run.startswith("arc_") and not run.startswith("arc_a3t"), paths[0]  # ARC's own file
    column = {"CF": "cf", "EX": "ex", "EX (exact verifier)": "exact"}[metric]
    has = [per_example.has_table(path) for path in paths]
    if b.startswith("no per-example table"):
      named = {"ARC's": [True, False], "the other's": [False, True],
               "ARC's and the other's": [True, True]}[b[b.index("(") + 1:b.rindex(")")]]
      assert [not h for h in has] == named, (table, against, metric, b)
      assert (c, p) == ("–", "–")
      continue
    first, second = (per_example.read(path) for path in paths)
    assert first["id"] == second["id"]
    result = stats.mcnemar(first[column], second[column])
    assert (int(b), int(c), p) == (result["only_first"], result["only_second"],
                                   stats.format_p(result["p_value"])), (table, against, metric)
    tested += 1
  assert tested >= 1 and len(rows) > tested  # some pairs tested, the rest said missing


def test_wall_times_are_the_seconds_the_results_files_record():
  """results/README.md's "Evaluation wall times": each cell is the ``seconds`` (and EX's
  ``enumerated``) of a committed results file of the row's run and space (issue 45: a hand-written
  paragraph of them had gone stale)."""
  section = _generated().split("### Evaluation wall times", 1)[1]
  rows = _table_rows(section, "| table | row | space | run |")
  assert len(rows) > 40
  for table, row, column, run, *cells in rows:
    records = list(_records(run, _where(table, row, column.strip("`"))))
    for metric, cell in zip(("acc", "cf", "ex", "hf"), cells):
      if cell == "–":
        assert not any(metric in r["metrics"] for r in records), (run, row, metric)
        continue
      found = [r["metrics"][metric] for r in records if metric in r["metrics"]]
      written = [f"{m['seconds']:,.1f} s" + (f" ({m['enumerated']:,})" if "enumerated" in m
                                              else "") for m in found]
      assert cell in written, (table, row, column, metric, cell, written)


# results/README.md's "How they were made": what each entry says of the training of its run(s),
# against their summary.json (issue 45: two entries described runs retrained since).

_TRAINING_FACTS = (
    # (pattern, the summary's numbers it states), "after epoch N" counting as "best epoch" does
    (r"early stopped after epoch (\d+), best epoch (\d+)",
     lambda s: (s["epochs_trained"] - 1, s["best"]["epoch"])),
    (r"\b(\d+) epochs, best epoch (\d+)", lambda s: (s["epochs_trained"], s["best"]["epoch"])),
    (r"\b([\d,]+) s of training", lambda s: (round(s["train_seconds"]),)),
    (r"best epoch \d+; ([\d,]+) s\b", lambda s: (round(s["train_seconds"]),)),
)


def _made_entries():
  """(comment text, commands) of each entry of the "How they were made" block."""
  text = (RESULTS / "README.md").read_text().split("## How they were made", 1)[1]
  block = text.split("```bash\n", 1)[1].split("```", 1)[0]
  entries, comment, commands = [], [], []
  for line in block.splitlines():
    if line.startswith("#"):
      if commands:
        entries.append((" ".join(comment), commands))
        comment, commands = [], []
      comment.append(line.lstrip("# "))
    elif line.strip():
      commands.append(line)
  return entries + [(" ".join(comment), commands)]


def _trained_runs(commands, cells):
  """The kept runs (their summary.json) that an entry's commands train or evaluate."""
  from tests.helpers.experiment_scripts import load_script  # noqa: PLC0415
  runs = load_script("runs")
  names = set()
  for command in commands:
    for pattern in re.findall(r"--only '?([^' ]+)'?", command):
      names |= {e.run.name for c in runs.select(cells, pattern) for e in c.evaluations}
    names |= {pathlib.Path(p).name for p in re.findall(r"--workdir (\S+)", command)}
  return {n: json.loads((RESULTS / n / "summary.json").read_text()) for n in names
          if (RESULTS / n / "summary.json").exists()}


def test_how_they_were_made_describes_the_committed_runs():
  from tests.helpers.experiment_scripts import load_script  # noqa: PLC0415
  cells = load_script("reproduce").cells()
  checked = 0
  for comment, commands in _made_entries():
    facts = [(pattern, tuple(int(g.replace(",", "")) for g in match.groups()), of)
             for pattern, of in _TRAINING_FACTS for match in re.finditer(pattern, comment)]
    if not facts:
      continue
    summaries = _trained_runs(commands, cells)
    assert summaries, f"no committed run for: {comment[:80]}"
    for pattern, stated, of in facts:
      assert stated in {of(s) for s in summaries.values()}, (
          comment[:80], pattern, stated, {n: of(s) for n, s in summaries.items()})
      checked += 1
  assert checked > 40


def test_results_readme_tree_arc_against_hotflip_quotes_the_paired_test():
  """The Tree-LSTM section's paired comparison of ARC with HotFlip training under EX is the one the
  two committed per-example tables give."""
  text = " ".join((RESULTS / "README.md").read_text().split())
  found = re.search(r"On the same ([\d,]+) trees \(the paired table above\) (\d+) are EX-robust only "
                    r"under ARC and (\d+) only under HotFlip training, McNemar p = ([\d.e-]+)", text)
  assert found, "the Tree-LSTM section lost its paired comparison of ARC and HotFlip"
  tables = [per_example.read(RESULTS / run / "eval" / "test_Del2Sub2_acc_cf_ex.json")["ex"]
            for run in ("arc_tree_del2sub2", "hotflip_tree_del2sub2")]
  test = stats.mcnemar(*(list(map(bool, t)) for t in tables))
  assert int(found[1].replace(",", "")) == len(tables[0])
  assert (int(found[2]), int(found[3])) == (test["only_first"], test["only_second"])
  assert float(found[4]) == float(f"{test['p_value']:.3g}")
