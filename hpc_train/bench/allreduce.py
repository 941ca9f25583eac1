"""All-reduce times between the tasks of one Slurm step, for the cost model (`hpc-train bench scaling`).

    srun hpc-train bootstrap -- python -m hpc_train.bench.allreduce [--repeats N]

Each task joins one MultiWorkerMirroredStrategy (TF_CONFIG from the bootstrap)
and sums float32 tensors from 16 KiB to 16 MiB the way the trainer does: many
all-reduces inside one TensorFlow call, as `steps_per_execution` runs its steps,
so Python's dispatch is not counted. The chief prints one JSON line:
{"workers": p, "sizes": [bytes...], "seconds": [median seconds per all-reduce...]}.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence

SIZES = tuple(4**k * 16384 for k in range(6))  # 16 KiB .. 16 MiB; the default CNN's gradients are 1.4 MB
IN_ONE_CALL = 20


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hpc_train.bench.allreduce", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7, help="timed calls per size (default 7)")
    args = parser.parse_args(argv)
    from hpc_train.training.keras import tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=tf.distribute.experimental.
                                                         CommunicationOptions(implementation="RING"))
    seconds = [_seconds_per_allreduce(tf, strategy, size, args.repeats) for size in SIZES]
    if strategy.extended.should_checkpoint:  # the chief speaks for the step
        print(json.dumps({"workers": strategy.num_replicas_in_sync, "sizes": list(SIZES), "seconds": seconds}))
    return 0


def _seconds_per_allreduce(tf, strategy, size: int, repeats: int) -> float:
    values = tf.ones([size // 4], tf.float32)

    def mean(tensor):
        with tf.device(strategy.extended.worker_devices[0]):  # a placed tensor, as gradients are: a destination
            placed = tf.identity(tensor)
        return tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.MEAN, placed)

    @tf.function
    def reduce_many(tensor):
        for _ in tf.range(IN_ONE_CALL):
            tensor = strategy.run(mean, args=(tensor,))
        return tensor

    reduce_many(values).numpy()  # traced and warmed up: channels open, buffers allocated
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        reduce_many(values).numpy()
        samples.append((time.perf_counter() - started) / IN_ONE_CALL)
    return statistics.median(samples)


if __name__ == "__main__":
    sys.exit(main())
