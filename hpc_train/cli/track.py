"""Upload a job's run folder to MLflow, for compute nodes that cannot reach the tracking server.

    hpc-train track sync 1234                       # to $MLFLOW_TRACKING_URI, else runs/mlflow.db
    hpc-train track sync 1234 --tracking-uri http://mlflow.example.org:5000

A job submitted with --track mlflow logs as it trains when its nodes reach the server; a job whose nodes
cannot (or whose server was down) keeps everything in its run folder, and this uploads it: the same run the
job began, when it began one, with only the epochs it lacks. Run it again at will.
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("sync",), help="sync: upload a job's run folder")
    parser.add_argument("job_id", metavar="ID", help="the job (a sweep: each of its elements)")
    parser.add_argument("--tracking-uri", default=None, metavar="URI",
                        help="the MLflow server or store (default: the job's, else $MLFLOW_TRACKING_URI, else "
                             "runs/mlflow.db)")
    parser.add_argument("--experiment", default=None, metavar="NAME",
                        help="the MLflow experiment (default: the job's, else its name)")


def run(args: argparse.Namespace) -> int:
    import importlib.util
    import os
    from pathlib import Path

    from hpc_train.errors import HpcTrainError
    from hpc_train.runs.folders import element_folders, find_record
    from hpc_train.runs.state import read_tracking
    from hpc_train.slurm.client import SlurmClient
    from hpc_train.tracking.settings import MISSING, absolute_uri

    if importlib.util.find_spec("mlflow") is None:
        raise HpcTrainError(MISSING.replace("--track mlflow", "hpc-train track sync"))
    record = find_record(args.job_id)
    from hpc_train.tracking.sync import sync

    first = element_folders(record)[0] if record.is_sweep and record.elements else Path(record.folder)
    known = read_tracking(first)  # where the job itself logged, unless told otherwise
    given = absolute_uri(args.tracking_uri, Path.cwd()) if args.tracking_uri else None  # relative: from here
    for line in sync(record, given or known.get("uri"), args.experiment or known.get("experiment"),
                     os.environ, SlurmClient.local()):  # how a job ended that could not say it itself
        print(line)
    return 0
