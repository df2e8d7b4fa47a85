"""The command lines as a user meets them, each run in a subprocess on a tiny fake data root:
Ctrl-C and SIGTERM save and print the resume command, user errors are one line with status 2
and write nothing, ``--help`` lists every config field, and the console scripts exist."""

import importlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from tests.helpers.cli_runs import EVALUATE, REPO, TINY, TRAIN, lines, run, tensorboard_scalars
from tests.helpers.fake_data_root import cache_dir, data_root  # noqa: F401  (fixtures)

import ml_collections

from arc_jax.train import ConfigError, default_config, validate
from arc_jax.train.config import FIELD_HELP, registered_blocks, run_name

METHOD_PLUGIN = "tests.helpers.method_plugin"


@pytest.fixture
def env(data_root, cache_dir):  # noqa: F811
  return dict(os.environ, ARC_DATA_DIR=str(data_root), ARC_CACHE_DIR=str(cache_dir),
              PYTHONPATH=str(REPO))


def wait_for_steps(runs: Path, count: int, process, timeout=300) -> Path:
  """The run directory under ``runs`` once its metrics.jsonl has ``count`` lines."""
  deadline = time.monotonic() + timeout
  while time.monotonic() < deadline:
    assert process.poll() is None, process.communicate()[1][-3000:]
    for metrics in runs.glob("*/metrics.jsonl"):
      if len(metrics.read_text().splitlines()) >= count:
        return metrics.parent
    time.sleep(0.2)
  process.kill()
  raise AssertionError(f"no {count} metrics lines in {timeout} s")


def test_a_signal_saves_a_checkpoint_and_prints_the_resume_command(tmp_path, env, data_root):  # noqa: F811
  previous = 0
  for sig in (signal.SIGINT, signal.SIGTERM):
    process = subprocess.Popen([sys.executable, TRAIN, *TINY], cwd=tmp_path, env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    workdir = wait_for_steps(tmp_path / "runs", previous + 3, process)
    process.send_signal(sig)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 128 + sig, stderr[-3000:]
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
    stop = re.fullmatch(
        rf"{sig.name}: stopped at step (\d+), checkpoint saved in runs/{workdir.name}\. Resume "
        rf"with: python {re.escape(TRAIN)} {re.escape(' '.join(TINY))}", lines(stderr)[-1])
    assert stop, lines(stderr)[-3:]
    step = int(stop[1])
    assert step > previous and (workdir / "checkpoints" / str(step)).is_dir()
    assert max(json.loads(l)["step"] for l in (workdir / "metrics.jsonl").open()) == step
    if previous:  # the second run resumed where the first stopped
      assert f"Resuming the unfinished run in runs/{workdir.name} from step {previous}" in stderr
    else:  # the start says where it writes and what it reads; one bar with an ETA
      assert f"Data folder {data_root.resolve()} ($ARC_DATA_DIR)." in stderr
      assert f"Run directory {workdir} (new run)." in stderr
      assert re.search(r"train +\d+%\|.*\| \d+/5000 \[.*, epoch \d+/999, ETA \d+:\d\d:\d\d",
                       stderr.replace("\r", "\n"))
      # The folder came from $ARC_DATA_DIR: the config names no machine path for it.
      recorded = json.loads((workdir / "config.json").read_text())
      assert (recorded["data_dir"], recorded["data_source"]) == (None, "$ARC_DATA_DIR")
      logged = [json.loads(l) for l in (workdir / "metrics.jsonl").open()]
      events = tensorboard_scalars(workdir / "tensorboard")
      assert [s for s, _ in events["train/loss"]] == [r["step"] for r in logged
                                                      if r["kind"] == "train"]
      assert [v for _, v in events["train/loss"]] == pytest.approx(
          [r["loss"] for r in logged if r["kind"] == "train"], rel=1e-6)
    previous = step


def damaged_root(root: Path, tmp_path: Path) -> Path:
  copy = shutil.copytree(root, tmp_path / "damaged")
  train = copy / "sst2" / "train.tsv.gz"
  train.write_bytes(train.read_bytes()[:-12])
  return copy


def train_errors(tmp_path, root):
  return {
      "missing config": ([TRAIN, "--config=experiments/configs/nope.py"], {},
                         r"error: Config file experiments/configs/nope\.py not found; pass a path "
                         r".* or a shipped config: a3t\.py, a3t_cnn\.py, arc\.py, arc_a3t\.py, "
                         r"attention\.py"),
      "unknown field": ([TRAIN, "--config.batchsize=3"], {},
                        r"error: config field 'batchsize' does not exist; did you mean "
                        r"'batch_size'"),
      "bad value": ([TRAIN, "--config.batch_size=many"], {},
                    r"error: --config\.batch_size=many: config field 'batch_size' takes an int "
                    r"\(default 32\)\.$"),
      "huge space": ([TRAIN, "--config.space=[(Del,50),(Sub,50)]"], {},
                     r"error: config\.space='\[\(Del,50\),\(Sub,50\)\]' has 2,601 budget slots "
                     r"per position; .* about \d+\.\d GiB .*--config\.allow_large_space=True"),
      "damaged data": ([TRAIN], {"ARC_DATA_DIR": str(damaged_root(root, tmp_path))},
                       r"error: Data file \S+/damaged/sst2/train\.tsv\.gz is truncated or corrupt "
                       r"\(EOFError: .*GLUE SST-2 .*docs/DATA\.md, SST-2\); fetch it again\."),
      "empty data folder": ([TRAIN], {"ARC_DATA_DIR": str(tmp_path)},
                            r"error: Data file\(s\) sst2/train\.tsv\.gz, .* not found in the data "
                            rf"folder {tmp_path} \(from \$ARC_DATA_DIR\)\. .*GLUE"),
      "no run": ([EVALUATE, "--workdir", "runs/none"], {},
                 r"error: runs/none does not exist: it is not a run directory"),
  }


@pytest.mark.parametrize("case", ["missing config", "unknown field", "bad value", "huge space",
                                  "damaged data", "empty data folder", "no run"])
def test_user_errors_are_one_line_with_status_2_and_write_nothing(tmp_path, env, data_root,  # noqa: F811
                                                                  case):
  work = tmp_path / "work"
  (work / "experiments" / "configs").mkdir(parents=True)
  args, changes, message = train_errors(tmp_path, data_root)[case]
  done = run(args, dict(env, **changes), work)
  assert done.returncode == 2, done.stderr[-3000:]
  assert "Traceback" not in done.stderr
  assert re.match(message, lines(done.stderr)[-1]), lines(done.stderr)[-1]
  assert not (work / "runs").exists()


def test_evaluate_checks_the_checkpoint_before_loading_data(tmp_path, env):
  (tmp_path / "run").mkdir()
  (tmp_path / "run" / "config.json").write_text(json.dumps(default_config().to_dict()))
  done = run([EVALUATE, "--workdir", "run"], dict(env, ARC_DATA_DIR=str(tmp_path / "no_data")),
             tmp_path)
  assert done.returncode == 2, done.stderr[-3000:]
  assert re.fullmatch(rf"error: No best checkpoint in run/best: it has not finished an epoch yet\. "
                      r"Train it .*", lines(done.stderr)[-1]), lines(done.stderr)[-1]
  assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["config.json"]


def test_help_lists_every_config_field_with_its_default_and_meaning(tmp_path, env):
  shared = {k for k, v in default_config().items() if not isinstance(v, ml_collections.ConfigDict)}
  assert set(FIELD_HELP) == shared
  blocks = registered_blocks()
  assert set(default_config()) - shared == set(blocks)
  done = run(["-m", "arc_jax.cli.train", "--help", "--config=tree.py"], env, tmp_path)
  assert done.returncode == 0, done.stderr[-3000:]
  for field, meaning in FIELD_HELP.items():
    assert re.search(rf"^  {field}=\S* +{re.escape(meaning)}(; one of: .*)?$", done.stdout,
                     re.M), field
  for name, block in blocks.items():
    for field, setting in block.fields.items():
      assert re.search(rf"^  {name}\.{field}=\S* +{re.escape(setting.describe())}$",
                       done.stdout, re.M), (name, field)
  assert "  optimizer=adagrad " in done.stdout and "--workdir DIR " in done.stdout
  assert "  tree_lstm.trainable_embeddings=True " in done.stdout


REGISTRIES = """if True:
    import json, sys
    from arc_jax.data.synonyms import SYNONYM_FILES
    from arc_jax.nn import CELLS
    from arc_jax.nn.models import POOLINGS
    from arc_jax.train import METHODS
    from arc_jax.train.families import FAMILIES
    from arc_jax.train.steps import OPTIMIZERS
    for plugin in sys.argv[1:]:
      __import__(plugin)
    print(json.dumps({"method": list(METHODS), "model": list(FAMILIES),
                      "lstm.pooling": list(POOLINGS), "lstm.cell": list(CELLS),
                      "synonyms": list(SYNONYM_FILES), "optimizer": list(OPTIMIZERS)}))"""


@pytest.mark.parametrize("plugins", [[], [METHOD_PLUGIN]], ids=["library", "plugin method"])
def test_help_lists_every_registered_choice(tmp_path, env, plugins):
  """--help names every method, model family, pooling, cell, lexicon and optimiser the
  registries hold, read in a fresh process (tests register entries of their own in this one);
  with a plugin that registers a method with its own settings block, that method and its block
  too: the plugin touches no file of the library."""
  registries = json.loads(subprocess.run([sys.executable, "-c", REGISTRIES, *plugins],
                                         capture_output=True, text=True, check=True,
                                         cwd=REPO).stdout.splitlines()[-1])
  flags = [f"--config.plugins={','.join(plugins)}"] if plugins else []
  done = run(["-m", "arc_jax.cli.train", "--help", *flags], env, tmp_path)
  assert done.returncode == 0, done.stderr[-3000:]
  for field, names in registries.items():
    line = re.search(rf"^  {re.escape(field)}=.*; one of: (.*)$", done.stdout, re.M)
    assert line and line[1].split(", ") == names, (field, names)
  if plugins:
    assert "toy" in registries["method"]
    assert re.search(r"^  toy_method\.weight=1\.0 +the toy method's weight$", done.stdout, re.M)


def test_a_plugin_method_reads_its_own_settings_block():
  from arc_jax.cli import train
  _, config, overridden = train.parse_flags([
      f"--config.plugins={METHOD_PLUGIN}", "--config.method=toy",
      "--config.toy_method.weight=3"])
  assert config.toy_method.weight == 3.0 and "toy_method.weight" in overridden
  with pytest.raises(ConfigError, match=r"config.method='toy': weight 3.0 is above 2"):
    validate(config)
  config.toy_method.weight = 2.0
  validate(config)
  assert run_name(config, overridden) == (
      "toy_lstm_del2sub2_pluginstests.helpers.methodplugin_weight2.0")


def test_overrides_take_their_fields_types_and_underscore_flags_still_work(capsys):
  from arc_jax.cli import evaluate, train
  args, config, overridden = train.parse_flags([
      "--config", "normal.py:bilstm", "--config.seed", "3", "--config.progress=false",
      "--config.lambda_max=1", "--config.allow_large_space", "--process_id=1", "--workdir=w"])
  assert (config.seed, config.progress, config.lambda_max, config.allow_large_space) == (
      3, False, 1.0, True)
  assert isinstance(config.lambda_max, float) and config.lstm.bidirectional
  assert overridden == {"seed", "progress", "lambda_max", "allow_large_space"}
  assert (args.process_id, args.workdir, args.overwrite) == (1, "w", False)
  assert evaluate.parse_args(["--workdir=w", "--exact_max_nodes=7"]).exact_max_nodes == 7
  assert capsys.readouterr().err.splitlines() == [
      f"warning: --{old} is deprecated; use --{old.replace('_', '-')} (the underscore spelling "
      "is accepted until the next release)." for old in ("process_id", "exact_max_nodes")]


def test_help_texts_written_out_name_every_registered_choice():
  """The help lines that name a registry's entries without importing it (arc-evaluate's
  --help starts no JAX) name every entry the library registers (read in a fresh process)."""
  registries = subprocess.run([sys.executable, "-c", """if True:
      import json
      from arc_jax.metrics import METRICS
      from arc_jax.verify import DEFAULT_WINDOW_RULE, WINDOW_RULES
      print(json.dumps({"metrics": list(METRICS), "rules": [WINDOW_RULES, DEFAULT_WINDOW_RULE]}))"""],
      capture_output=True, text=True, check=True, cwd=REPO).stdout
  from arc_jax.cli import evaluate
  registered = json.loads(registries.splitlines()[-1])
  names = registered["metrics"]
  assert names and all(re.search(rf"\b{name}\b", evaluate.METRICS_HELP) for name in names), (
      evaluate.METRICS_HELP, names)
  rules, default = registered["rules"]
  assert (list(evaluate.WINDOW_RULES), evaluate.DEFAULT_WINDOW_RULE) == (rules, default)


SCRIPTS = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
WRAPPERS = ("train", "evaluate", "certify", "report")
HEAVY = ("jax", "flax", "optax", "orbax", "tensorflow_datasets")
READS_REGISTRIES = ("arc-train", "experiments/train.py")
"""The commands whose --help lists the registries' entries (arc_jax.train.config.choices and
the settings blocks): they import JAX, Flax, Optax and TFDS, but start no backend and no Orbax."""
HELP_CHECK = """
import importlib, runpy, sys
script, target = sys.argv[1:]
sys.argv = [script, "--help"]
try:
  if target.endswith(".py"):
    runpy.run_path(target, run_name="__main__")
  else:
    module, _, function = target.partition(":")
    getattr(importlib.import_module(module), function)()
except SystemExit as done:
  assert done.code in (0, None), done.code
heavy = [name for name in {heavy!r} if name in sys.modules]
assert not heavy, f"--help imported {{heavy}}"
if "jax" in sys.modules:
  from jax._src import xla_bridge
  assert not xla_bridge._backends, "--help started a JAX backend"
"""


def test_console_scripts_are_the_cli_entry_points():
  assert set(SCRIPTS) == {"arc-train", "arc-evaluate", "arc-certify", "arc-report", "arc-import"}
  for target in SCRIPTS.values():
    module, _, function = target.partition(":")
    assert callable(getattr(importlib.import_module(module), function))


@pytest.mark.parametrize("script", [*SCRIPTS, *(f"experiments/{w}.py" for w in WRAPPERS)])
def test_help_answers_without_importing_jax(tmp_path, env, script):
  """Each console script's entry point and each experiments/ wrapper prints its usage for
  --help, with JAX, Flax, Optax, Orbax and TFDS not imported (the training commands, which list
  the registries: Orbax not imported and no JAX backend started)."""
  target = SCRIPTS.get(script) or str(REPO / script)
  heavy = ("orbax",) if script in READS_REGISTRIES else HEAVY
  done = run(["-c", HELP_CHECK.format(heavy=heavy), script, target], env, tmp_path)
  assert done.returncode == 0, done.stderr[-3000:]
  assert "usage:" in done.stdout and "--help" in done.stdout


def free_port() -> int:
  import socket
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


@pytest.mark.slow
def test_two_processes_of_four_devices_train_to_the_summary_of_one_process(tmp_path, env):
  """``--multihost`` over loopback: 2 processes × 4 CPU devices against 1 process × 8 (normal
  training of a tiny LSTM; its dev and test certification run on the mesh too)."""
  tiny = ["--config=normal.py", "--config.hidden=4", "--config.lstm.projection=4",
          "--config.lstm.head_hidden=4", "--config.batch_size=8", "--config.eval_batch_size=8",
          "--config.num_epochs=2"]
  cpus = dict(env, JAX_PLATFORMS="cpu")
  single = run([TRAIN, *tiny, "--workdir=one"], dict(
      cpus, XLA_FLAGS="--xla_force_host_platform_device_count=8"), tmp_path)
  assert single.returncode == 0, single.stderr[-3000:]
  address = f"127.0.0.1:{free_port()}"
  processes = [subprocess.Popen(
      [sys.executable, TRAIN, *tiny, "--workdir=two", "--multihost", f"--process-id={i}"],
      env=dict(cpus, XLA_FLAGS="--xla_force_host_platform_device_count=4",
               JAX_COORDINATOR_ADDRESS=address, JAX_NUM_PROCESSES="2"),
      cwd=tmp_path, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for i in range(2)]
  outputs = [p.communicate(timeout=600)[1] for p in processes]
  assert [p.returncode for p in processes] == [0, 0], [o[-3000:] for o in outputs]
  assert "JAX process 0 of 2, 8 devices" in outputs[0] and "Run directory" in outputs[0]
  assert "Run directory" not in outputs[1] and "train " not in outputs[1]  # no logs, no bars

  def summary(workdir):
    out = json.loads((tmp_path / workdir / "summary.json").read_text())
    return {k: v for k, v in out.items() if "seconds" not in k} | {
        "test": {k: v for k, v in out["test"].items() if k != "seconds"}}

  assert summary("two") == summary("one") and summary("one")["devices"] == 8
