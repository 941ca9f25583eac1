"""A TensorFlow process's start with Python's garbage collector paused at TensorFlow's import (as shipped) or not
(the import as before): BENCHMARKS.md, "the garbage collector paused at TensorFlow's import".

    farm-bench -n 10 --vs 'python benchmarks/collector_at_import.py rank plain' -- \\
        python benchmarks/collector_at_import.py rank paused
    farm-bench -n 8 --vs 'python benchmarks/collector_at_import.py server plain' -- \\
        python benchmarks/collector_at_import.py server paused

rank: a trainer's whole one-process life, 1 epoch of 2,000 MNIST images ($HPC_TRAIN_DATA_DIR, else
../shared/data/mnist); server: a data service's dispatcher, up.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from pathlib import Path

from hpc_train.bootstrap import tfimport

DATA = os.environ.get("HPC_TRAIN_DATA_DIR", str(Path(__file__).resolve().parents[2] / "shared" / "data" / "mnist"))


def rank() -> None:
    from hpc_train.cli import main

    out = tempfile.mkdtemp()
    try:
        main(["train", "--data-dir", DATA, "--set", "epochs=1", "--set", "train_images=2000", "--output-dir", out])
    finally:
        shutil.rmtree(out)


def server() -> None:
    tf = tfimport.tensorflow(with_keras=False)
    tf.data.experimental.service.DispatchServer(tf.data.experimental.service.DispatcherConfig(port=0))


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("rank", "server") or sys.argv[2] not in ("paused", "plain"):
        sys.exit("usage: python benchmarks/collector_at_import.py rank|server paused|plain")
    if sys.argv[2] == "plain":
        tfimport.collector_paused = contextlib.nullcontext  # the import as before
    if sys.argv[1] == "rank":
        rank()
    else:
        server()
