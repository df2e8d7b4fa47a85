"""Abstract domains by name (:mod:`arc_jax.domains`) from the command line: a toy domain with a
setting of its own (tests/helpers/widened_domain.py, registered without touching a library file)
certifies a tiny run trained on the fake data root through ``arc-evaluate --plugins MODULE --domain
NAME --domain-setting FIELD=VALUE``; its results record the domain and its settings and are named
by them; ``--help`` lists every registered domain; unknown domains and settings are one-line errors
with status 2 that name the valid choices."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import widened_domain
from tests.helpers.fake_data_root import write_data_root

from arc_jax import domains, per_example
from arc_jax.cli import evaluate
from arc_jax.evaluation import evaluate_run, results_path
from arc_jax.train import ConfigError, default_config, train_and_evaluate

REPO = Path(__file__).resolve().parents[1]
SPACE = "[(Del,1),(Sub,1)]"


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
  """A run of normal training (one epoch, 4 hidden units) on the fake data root."""
  folder = tmp_path_factory.mktemp("domains_by_name")
  with pytest.MonkeyPatch.context() as patch:
    patch.setenv("ARC_DATA_DIR", str(write_data_root(folder / "data")))
    patch.setenv("ARC_CACHE_DIR", str(folder / "cache"))
    c = default_config()
    c.name, c.method, c.space = "domains_test", "normal", SPACE
    c.hidden = 4
    c.batch_size = c.eval_batch_size = 4
    c.num_epochs = 1
    c.progress = False
    train_and_evaluate(c, folder / "run")
    yield folder / "run"


def cli(run: Path, *args: str) -> int:
  return evaluate.main(["--workdir", str(run), "--metrics", "acc,cf", "--no-progress", *args])


def test_a_registered_domain_with_a_setting_certifies_from_evaluate(tiny_run):
  assert domains.DOMAINS["widened"] is widened_domain.ENTRY
  assert cli(tiny_run) == 0
  interval = json.loads((tiny_run / "eval" / "test_Del1Sub1_acc_cf.json").read_text())
  assert (interval["domain"], interval["domain_settings"]) == ("interval", {})
  # A user names the module that registers the domain (imported before anything else).
  assert cli(tiny_run, "--plugins", "tests.helpers.widened_domain", "--domain", "widened",
             "--domain-setting", "factor=1") == 0
  same = json.loads((tiny_run / "eval" / "test_Del1Sub1_widened_factor1p0_acc_cf.json")
                    .read_text())
  assert (same["domain"], same["domain_settings"]) == ("widened", {"factor": 1.0})
  assert cli(tiny_run, "--domain=widened", "--domain-setting=factor=8") == 0
  wide_file = tiny_run / "eval" / "test_Del1Sub1_widened_factor8p0_acc_cf.json"
  wide = json.loads(wide_file.read_text())
  assert (wide["domain"], wide["domain_settings"]) == ("widened", {"factor": 8.0})
  # Sound and looser: CF ≤ interval's, per example; factor 1 is the interval domain exactly.
  assert wide["metrics"]["acc"] == {**interval["metrics"]["acc"],
                                    "seconds": wide["metrics"]["acc"]["seconds"]}
  assert wide["metrics"]["cf"]["count"] <= interval["metrics"]["cf"]["count"]
  tables = {name: per_example.read(tiny_run / "eval" / f"test_Del1Sub1{name}_acc_cf.json")
            for name in ("", "_widened_factor1p0", "_widened_factor8p0")}
  base, one, eight = (tables[k]["cf_margin"] for k in tables)
  assert one == base
  assert all(w <= b for w, b in zip(eight, base)) and any(w < b for w, b in zip(eight, base))
  assert all(w <= b for w, b in zip(tables["_widened_factor8p0"]["cf"], tables[""]["cf"]))
  # The default setting (factor 2) names no setting in the file name.
  default = {**wide, "domain_settings": {"factor": 2.0}}
  assert results_path(tiny_run, default, True).name == "test_Del1Sub1_widened_acc_cf.json"
  assert results_path(tiny_run, {**wide, "domain": "interval", "domain_settings": {}},
                      True).name == "test_Del1Sub1_acc_cf.json"


@pytest.mark.parametrize("args, message", [
    (["--domain", "box"], r"Unknown domain 'box'; choose one of \[.*'interval', "
                          r"'linear_step', 'point', 'widened'.*\]"),
    (["--domain", "widened", "--domain-setting", "width=2"],
     r"widened has no setting 'width'; its settings: \['factor'\]\."),
    (["--domain", "widened", "--domain-setting", "factor=wide"],
     r"widened\.factor=wide: .*takes a float \(default 2\.0\)\."),
    (["--domain", "widened", "--domain-setting", "factor=0.5"],
     r"widened\.factor=0\.5: the widening factor must be >= 1"),
    (["--domain-setting", "factor=2"], r"Domain 'interval' has no settings \(got \['factor'\]\)"),
    (["--plugins", "tests.helpers.no_such_domain", "--domain", "mine"],
     r"--plugins: cannot import 'tests\.helpers\.no_such_domain' \(.*\); install it or put its "
     r"folder on PYTHONPATH\."),
])
def test_unknown_domains_and_settings_are_one_line_errors_with_status_2(tiny_run, capsys, args,
                                                                         message):
  capsys.readouterr()
  before = sorted((tiny_run / "eval").iterdir()) if (tiny_run / "eval").exists() else []
  assert cli(tiny_run, *args) == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert re.fullmatch(rf"error: {message}.*", err[-1]), err[-1]
  after = sorted((tiny_run / "eval").iterdir()) if (tiny_run / "eval").exists() else []
  assert after == before  # nothing written


def test_a_tree_lstm_takes_the_interval_domain_only(tmp_path, monkeypatch):
  from arc_jax.train.checkpoints import RunDirectory  # pylint: disable=import-outside-toplevel
  config = default_config()
  config.model, config.dataset = "tree_lstm", "sst_trees"
  (tmp_path / "config.json").write_text(json.dumps(config.to_dict()))
  monkeypatch.setattr(RunDirectory, "require_checkpoint", lambda self, which: None)
  with pytest.raises(ConfigError, match=r"^The Tree-LSTM DP has rules for the interval domain "
                     r"only, not 'linear_step': evaluate trees with --domain interval"):
    evaluate_run(tmp_path, domain="linear_step")


def test_help_lists_every_registered_domain_with_its_help_and_settings():
  """Read in fresh processes: this one has registered a toy domain of its own."""
  env = dict(os.environ, PYTHONPATH=str(REPO))
  registry = subprocess.run([sys.executable, "-c", """if True:
      import json
      from arc_jax.domains import DOMAINS
      print(json.dumps({name: entry.help for name, entry in DOMAINS.items()}))"""],
      capture_output=True, text=True, check=True, cwd=REPO, env=env).stdout
  names = json.loads(registry.splitlines()[-1])
  assert {"interval", "linear_step", "point"} <= set(names)
  shown = subprocess.run([sys.executable, str(REPO / "experiments" / "evaluate.py"), "--help"],
                         capture_output=True, text=True, check=True, cwd=REPO, env=env).stdout
  for name, help_line in names.items():
    assert re.search(rf"^  {name} +{re.escape(help_line)}$", shown, re.M), (name, shown)
  assert "widened" not in names  # registered by the test's helper only
  # A domain a plugin registers is listed too, with its settings.
  shown = subprocess.run([sys.executable, str(REPO / "experiments" / "evaluate.py"), "--plugins",
                          "tests.helpers.widened_domain", "--help"],
                         capture_output=True, text=True, check=True, cwd=REPO, env=env).stdout
  assert re.search(rf"^  widened +{re.escape(widened_domain.ENTRY.help)}$", shown, re.M), shown
  assert re.search(r"^      factor=2\.0  each affine map's box widened .*\(>= 1\)$", shown,
                   re.M), shown


def test_exact_verifies_in_the_named_domain(tiny_run):
  """The complete verifier certifies its sub-spaces in the domain too (its proofs count what
  enumeration confirms: the evaluation checks CF ≤ exact ≤ EX per example)."""
  results = evaluate_run(tiny_run, metrics=["ex", "exact"], domain="widened",
                         domain_settings={"factor": 8.0}, progress=False)
  metrics = results["metrics"]
  assert results["domain_settings"] == {"factor": 8.0}
  assert metrics["cf"]["count"] <= metrics["exact"]["count"] == metrics["ex"]["count"]
  assert metrics["exact"]["unknowns"] == 0


def test_the_linear_step_domain_by_name_certifies_at_least_what_intervals_do(tiny_run):
  interval, linear = (evaluate_run(tiny_run, metrics=["acc", "cf"], domain=name, progress=False)
                      for name in ("interval", "linear_step"))
  assert (linear["domain"], linear["domain_settings"]) == ("linear_step", {})
  assert results_path(tiny_run, linear, True).name == "test_Del1Sub1_linear_step_acc_cf.json"
  # Intersected with the interval certificate (LinearStepDomain.refines): never looser.
  assert all(l >= i for l, i in zip(linear["per_example"]["cf_margin"],
                                    interval["per_example"]["cf_margin"]))
  assert linear["metrics"]["cf"]["count"] >= interval["metrics"]["cf"]["count"]
