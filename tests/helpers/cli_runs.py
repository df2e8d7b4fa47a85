"""The experiments' command lines in subprocesses: paths, tiny-run flags, stderr lines, scalars."""

import struct
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TRAIN, EVALUATE = str(REPO / "experiments" / "train.py"), str(REPO / "experiments" / "evaluate.py")
# Normal training of a tiny LSTM, one example per step, for a long time.
TINY = ["--config=normal.py", "--config.hidden=4", "--config.lstm.projection=4",
        "--config.lstm.head_hidden=4", "--config.batch_size=1", "--config.eval_batch_size=1",
        "--config.log_every=1", "--config.num_epochs=1000"]


def run(args, env, cwd, timeout=300):
  return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env,
                        cwd=cwd, timeout=timeout, check=False)


def lines(stderr: str) -> list[str]:
  return [line for line in stderr.replace("\r", "\n").splitlines() if line.strip()]


def tensorboard_scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
  """tag → [(step, value)] of the event files in ``folder`` (TFRecord framing: length, its CRC,
  the Event proto, its CRC)."""
  from tensorboardX.proto import event_pb2
  out = {}
  for path in sorted(folder.glob("events.out.tfevents.*")):
    data, i = path.read_bytes(), 0
    while i < len(data):
      (length,) = struct.unpack("<Q", data[i:i + 8])
      event = event_pb2.Event.FromString(data[i + 12:i + 12 + length])
      i += 16 + length
      for value in event.summary.value:
        out.setdefault(value.tag, []).append((event.step, value.simple_value))
  return out
