"""Copy a job's or a sweep's run folders from a remote into ./runs/ here: metrics, model, TensorBoard, logs,
provenance, all of it (rsync: what is already here is not copied again).

    hpc-train pull JOBID [--remote NAME]      # runs/NAME-JOBID/ (default remote: where it was submitted from here)
    hpc-train pull ARRAYID [--remote NAME]    # the sweep's folder and each element's, runs/NAME-ARRAYID_I/
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("job", metavar="ID", help="a job's, a sweep's or one element's id (123, 123_4)")
    parser.add_argument("--remote", default=None, metavar="NAME", help="default $HPC_TRAIN_REMOTE, else the remote the job "
                        "was submitted to from here")


def run(args: argparse.Namespace) -> int:
    import os
    from pathlib import Path

    from hpc_train.errors import HpcTrainError
    from hpc_train.remote import config
    from hpc_train.remote.sent import where
    from hpc_train.remote.transfer import pull

    name = config.chosen(args.remote, os.environ) or where(args.job, os.environ)  # where it was sent from here
    if name is None:
        raise HpcTrainError(f"pull copies from a remote: job {args.job} was not submitted from here; give --remote "
                            "NAME or set HPC_TRAIN_REMOTE (hpc-train remote list shows them)")
    remote = config.find(name, os.environ)
    names = pull(remote, args.job, Path("runs"), os.environ)
    for folder in names:
        print(f"runs/{folder}")
    print(f"hpc-train pull: {len(names)} run folder(s) of job {args.job} from {remote.host} in runs/",
          flush=True)
    return 0
