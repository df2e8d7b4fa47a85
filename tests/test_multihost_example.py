"""The worked multi-host examples of docs/MULTIHOST.md run as written.

docs/multihost/train.slurm runs as sbatch would run it, with an ``srun`` that starts its tasks
as local processes with the variables SLURM gives each task: its ``--multihost`` training then
initializes through JAX's own SLURM cluster detection (no coordinator flags, no
``$JAX_COORDINATOR_ADDRESS``), 2 processes × 4 CPU devices training a tiny LSTM on one mesh of 8.
(tests/cli/test_cli.py, slow, checks that such a run's summary equals that of 1 process × 8
devices, with the coordinator given by ``$JAX_COORDINATOR_ADDRESS``.) The TPU pod command of
docs/multihost/tpu_pod.sh cannot run here; its arc-train flags are parsed by arc-train's parser.
"""

import json
import os
import re
import shlex
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers.fake_data_root import cache_dir, data_root  # noqa: F401  (fixtures)

REPO = Path(__file__).resolve().parents[1]
SLURM_SCRIPT = REPO / "docs" / "multihost" / "train.slurm"
TPU_SCRIPT = REPO / "docs" / "multihost" / "tpu_pod.sh"
TINY = ["--config=normal.py", "--config.hidden=4", "--config.lstm.projection=4",
        "--config.lstm.head_hidden=4", "--config.batch_size=8", "--config.eval_batch_size=8",
        "--config.num_epochs=1"]

# What srun does for the script's one job step: start SLURM_NTASKS copies of the command, each
# with its task's variables (one node, "localhost", holds them all), and stop the others when
# one fails (--kill-on-bad-exit). Each task's stderr goes to $FAKE_SRUN_LOGS/task<i>.err.
FAKE_SRUN = textwrap.dedent(f"""\
    #!{sys.executable}
    import os, subprocess, sys, time
    command = sys.argv[1:]
    while command and command[0].startswith("-"):  # srun's own options
      command.pop(0)
    logs = os.environ["FAKE_SRUN_LOGS"]
    tasks = [subprocess.Popen(command, stderr=open(os.path.join(logs, f"task{{i}}.err"), "w"),
                              env=dict(os.environ, SLURM_PROCID=str(i), SLURM_LOCALID=str(i),
                                       SLURM_STEP_NODELIST="localhost", SLURM_STEP_NUM_NODES="1"))
             for i in range(int(os.environ["SLURM_NTASKS"]))]
    while any(t.poll() is None for t in tasks):
      if any(t.poll() not in (None, 0) for t in tasks):
        for t in tasks:
          t.kill()
      time.sleep(0.2)
    sys.exit(max(abs(t.returncode) for t in tasks))
    """)


@pytest.fixture
def env(data_root, cache_dir):  # noqa: F811
  out = dict(os.environ, ARC_DATA_DIR=str(data_root), ARC_CACHE_DIR=str(cache_dir),
             PYTHONPATH=str(REPO), JAX_PLATFORMS="cpu")
  for variable in ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID",
                   "JAX_COORDINATOR_PORT", "JAX_LOCAL_DEVICE_IDS", "OMPI_MCA_orte_hnp_uri"):
    out.pop(variable, None)
  return out


def job_id_with_a_free_port() -> int:
  """A SLURM job id whose coordinator port is free here: JAX's SlurmCluster takes port
  ``job_id % 4096 + 61440``."""
  for _ in range(100):
    with socket.socket() as s:
      s.bind(("127.0.0.1", 0))
      port = s.getsockname()[1]
    if port >= 61440:
      return 4096 * 123 + port - 61440
  with socket.socket() as s:  # the ephemeral range lies below 61440 here: try that range itself
    for port in range(61440 + os.getpid() % 2048, 65536):
      try:
        s.bind(("127.0.0.1", port))
      except OSError:
        continue
      return 4096 * 123 + port - 61440
  raise AssertionError("no free port in 61440-65535")


def srun_command(script: Path) -> list[str]:
  """The script's srun line, as words."""
  lines = [line for line in script.read_text().splitlines() if line.startswith("srun ")]
  assert len(lines) == 1, lines
  return shlex.split(lines[0])


def test_the_slurm_script_trains_on_two_processes_that_jax_finds_from_slurm(tmp_path, env):
  command = srun_command(SLURM_SCRIPT)
  assert command[command.index("python"):][:3] == ["python", "experiments/train.py",
                                                   "--multihost"]
  assert not any(word.startswith(("--coordinator", "--num_processes", "--num-processes",
                                  "--process_id", "--process-id")) for word in command)
  (tmp_path / "bin").mkdir()
  (tmp_path / "bin" / "srun").write_text(FAKE_SRUN)
  (tmp_path / "bin" / "srun").chmod(0o755)
  (tmp_path / "logs").mkdir()
  batch_env = dict(
      env, PATH=os.pathsep.join([str(tmp_path / "bin"), str(Path(sys.executable).parent),
                                 env["PATH"]]),
      FAKE_SRUN_LOGS=str(tmp_path / "logs"), WORKDIR=str(tmp_path / "run"),
      # What sbatch sets for the batch script (2 tasks here).
      SLURM_JOB_ID=str(job_id_with_a_free_port()), SLURM_JOB_NAME="arc-train", SLURM_NTASKS="2",
      XLA_FLAGS=f"{env.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=4".strip())
  done = subprocess.run(["bash", str(SLURM_SCRIPT), *TINY], env=batch_env, cwd=REPO,
                        capture_output=True, text=True, timeout=600, check=False)
  logs = [(tmp_path / "logs" / f"task{i}.err").read_text() for i in range(2)]
  assert done.returncode == 0, [done.stderr[-2000:]] + [log[-3000:] for log in logs]
  assert "JAX process 0 of 2, 8 devices (cpu)" in logs[0], logs[0][-3000:]
  assert "Run directory" in logs[0] and "Run directory" not in logs[1]  # logs from process 0
  summary = json.loads((tmp_path / "run" / "summary.json").read_text())
  assert summary["devices"] == 8 and summary["status"] == "completed", summary


def test_the_tpu_pod_command_runs_arc_train_as_one_process_of_its_own(tmp_path, env):
  """The remote command of the gcloud line, run here as a slice of one worker: the coordinator
  from ``$JAX_COORDINATOR_ADDRESS`` (which the TPU metadata gives on a pod), tiny overrides as the
  script's extra flags, the shared folder a temporary one."""
  ssh = [line for line in TPU_SCRIPT.read_text().splitlines() if line.startswith("gcloud ")]
  assert len(ssh) == 1, ssh
  words = shlex.split(ssh[0])
  assert words[:5] == ["gcloud", "compute", "tpus", "tpu-vm", "ssh"] and "--worker=all" in words
  remote = next(w for w in words if w.startswith("--command="))[len("--command="):]
  remote = remote.replace("$SHARED", str(tmp_path / "shared")).replace("$RUN", "tiny")
  remote = remote.replace("$*", shlex.join(TINY[1:]))  # the script's extra flags
  assert "$" not in remote, remote
  assignments, command = [], shlex.split(remote)
  while "=" in command[0] and not command[0].startswith("-"):
    assignments.append(command.pop(0))
  assert command[:2] == ["arc-train", "--multihost"] and not any(
      re.match(r"--(coordinator|num.processes|process.id)", word) for word in command), command
  (tmp_path / "shared").mkdir()
  (tmp_path / "shared" / "arc_data").symlink_to(env["ARC_DATA_DIR"])
  run_env = dict(env, **dict(a.split("=", 1) for a in assignments),
                 PATH=os.pathsep.join([str(Path(sys.executable).parent), env["PATH"]]),
                 JAX_COORDINATOR_ADDRESS=f"127.0.0.1:{job_id_with_a_free_port() % 4096 + 61440}",
                 JAX_NUM_PROCESSES="1", JAX_PROCESS_ID="0")
  done = subprocess.run(command, env=run_env, cwd=tmp_path, capture_output=True, text=True,
                        timeout=600, check=False)
  assert done.returncode == 0, done.stderr[-3000:]
  assert "JAX process 0 of 1" in done.stderr, done.stderr[-3000:]
  summary = json.loads((tmp_path / "shared" / "arc_runs" / "tiny" / "summary.json").read_text())
  assert summary["method"] == "arc" and summary["status"] == "completed", summary
