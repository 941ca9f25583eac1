"""The options of an MLflow-tracked run (--track, --tracking-uri, --experiment) for submit, render and train:
parsed, turned into the trainer's settings, and checked before anything is queued."""

from __future__ import annotations

import argparse
import os
from pathlib import Path


def add_tracking_arguments(parser: argparse.ArgumentParser) -> None:
    """--track, --tracking-uri, --experiment: submit's, render's and train's (each the same as its --set)."""
    parser.add_argument("--track", choices=("none", "mlflow"), default=None,
                        help="mlflow: one MLflow run per job, kept through requeues and retries (same as --set "
                             "track=mlflow; pip install 'hpc-train[mlflow]')")
    parser.add_argument("--tracking-uri", default=None, metavar="URI",
                        help="the MLflow server or store (default: $MLFLOW_TRACKING_URI, else runs/mlflow.db)")
    parser.add_argument("--experiment", default=None, metavar="NAME", help="the MLflow experiment (default: the "
                        "job's name)")


def tracking_overrides(args: argparse.Namespace) -> list[str]:
    """The tracking flags as --set's words (a flag given wins over the YAML, as --set does)."""
    return [f"{key}={value}" for key, value in (("track", args.track), ("tracking_uri", args.tracking_uri),
                                                ("experiment", args.experiment)) if value is not None]


def check_tracking(config, say_unreachable: bool) -> None:  # config: TrainConfig
    """A job that asks for MLflow where it is not installed is refused in one line; with `say_unreachable`
    (submit), a tracking server that does not answer is a warning: the job is queued all the same."""
    if config.track != "mlflow":
        return
    import importlib.util
    import sys

    from hpc_train.errors import HpcTrainError
    from hpc_train.tracking.settings import MISSING, URI_VARIABLE

    if importlib.util.find_spec("mlflow") is None:
        raise HpcTrainError(MISSING)
    uri = config.tracking_uri or os.environ.get(URI_VARIABLE) or ""
    if say_unreachable and uri.startswith(("http://", "https://")):
        import urllib.request

        try:
            urllib.request.urlopen(f"{uri.rstrip('/')}/health", timeout=3).close()
        except (OSError, ValueError) as error:
            print(f"hpc-train: warning: MLflow at {uri} does not answer ({error}); the job is queued all the same, "
                  "and logs to it if it answers then (else: hpc-train track sync ID)", file=sys.stderr)


def tracking_from_here(config):  # (TrainConfig) -> TrainConfig
    """--tracking-uri (or the YAML's tracking_uri) made absolute from the submit directory: the job runs in the code
    snapshot, where a relative store (sqlite:///x.db, a bare path) would be another, empty one."""
    from dataclasses import replace

    from hpc_train.tracking.settings import absolute_uri

    return replace(config, tracking_uri=absolute_uri(config.tracking_uri, Path.cwd())) if config.tracking_uri else config
