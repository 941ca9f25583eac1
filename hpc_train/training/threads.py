"""TensorFlow's inter-op thread pool, sized before TensorFlow starts.

TensorFlow gives a process one inter-op thread per CPU it may run on. A task
bound to one core (`srun --cpus-per-task=1`, `taskset`) so gets one thread, and
a parameter-server worker then waits forever in its first steps, at 0% CPU (found
by `hpc-train bench scaling`); collectives run slower too. Hence never fewer
than two. TF_NUM_INTEROP_THREADS is read when TensorFlow starts, by the eager
runtime and by a `tf.distribute.Server` alike; `tf.config.threading` reaches only
the former.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

MIN_INTER_OP_THREADS = 2
VARIABLE = "TF_NUM_INTEROP_THREADS"


def inter_op_threads(requested: int | None, usable_cpus: int) -> int:
    """The pool size: what the config asks, else TensorFlow's one per CPU but at least MIN_INTER_OP_THREADS."""
    return requested or max(MIN_INTER_OP_THREADS, usable_cpus)


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity, which Slurm and taskset set), not the machine's."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def size_inter_op_pool(requested: int | None, environ: MutableMapping[str, str] = os.environ) -> int:
    """Export the pool size for TensorFlow to read; a size already in the environment stands unless requested."""
    if requested is None and environ.get(VARIABLE, "").isdigit() and int(environ[VARIABLE]) > 0:
        return int(environ[VARIABLE])
    threads = inter_op_threads(requested, usable_cpus())
    environ[VARIABLE] = str(threads)
    return threads
