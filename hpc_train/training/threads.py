"""TensorFlow's inter-op thread pool, sized before TensorFlow starts.

TensorFlow gives a process one inter-op thread per CPU it may run on. A
parameter-server task bound to one core (`srun --cpus-per-task=1`, `taskset`)
so gets one thread, and the workers then wait forever in their first steps, at
0% CPU (found by `hpc-train bench scaling`): their steps block on receives from
the ps. Parameter-server tasks therefore get at least two. MultiWorkerMirrored
tasks keep TensorFlow's default: on one core each, two threads cost 2 workers
about 8 points of scaling efficiency (77-79% against 85-87% at 1,024 images per
worker, measured side by side). TF_NUM_INTEROP_THREADS is read when TensorFlow
starts, by the eager runtime and by a `tf.distribute.Server` alike;
`tf.config.threading` reaches only the former.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

MIN_PARAMETER_SERVER_THREADS = 2
VARIABLE = "TF_NUM_INTEROP_THREADS"


def inter_op_threads(requested: int | None, usable_cpus: int, strategy: str) -> int:
    """The pool size: what the config asks, else one per CPU, and never one for a parameter-server task."""
    if requested:
        return requested
    if strategy == "parameter_server":
        return max(MIN_PARAMETER_SERVER_THREADS, usable_cpus)
    return max(1, usable_cpus)


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity, which Slurm and taskset set), not the machine's."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def size_inter_op_pool(requested: int | None, strategy: str,
                       environ: MutableMapping[str, str] = os.environ) -> int:
    """Export the pool size for TensorFlow to read; a size already in the environment stands unless requested."""
    if requested is None and environ.get(VARIABLE, "").isdigit() and int(environ[VARIABLE]) > 0:
        return int(environ[VARIABLE])
    threads = inter_op_threads(requested, usable_cpus(), strategy)
    environ[VARIABLE] = str(threads)
    return threads
