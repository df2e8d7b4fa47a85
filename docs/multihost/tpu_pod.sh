#!/bin/bash
# Data-parallel training of arc_jax on a Cloud TPU pod slice (docs/MULTIHOST.md): the same
# command on every worker (host) of the slice, one JAX process per worker.
#
#   TPU=arc-v4-32 ZONE=us-central2-b bash docs/multihost/tpu_pod.sh [FLAGS of arc-train ...]
#
# Each worker needs arc_jax installed (once: gcloud compute tpus tpu-vm ssh "$TPU" --zone="$ZONE"
# --worker=all --command="pip install 'jax[tpu]' && pip install -e ~/arc_jax") and the data and
# the run directory on a file system all workers mount (SHARED, e.g. a Filestore share).
# A v4-32 slice has 16 chips on 4 workers: batch sizes must be multiples of 16.
set -euo pipefail
TPU=${TPU:?name of the TPU VM slice}
ZONE=${ZONE:?its zone}
SHARED=${SHARED:-/mnt/shared}
RUN=${RUN:-arc_lstm_del2sub2}

# --multihost with no coordinator flags: jax.distributed.initialize() reads the slice's workers
# and this worker's index from the TPU VM's metadata.
gcloud compute tpus tpu-vm ssh "$TPU" --zone="$ZONE" --worker=all --command="ARC_DATA_DIR=$SHARED/arc_data ARC_CACHE_DIR=$SHARED/arc_cache arc-train --multihost --config=arc.py --workdir=$SHARED/arc_runs/$RUN $*"
