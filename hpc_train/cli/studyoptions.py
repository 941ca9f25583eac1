"""A sweep's study options, render's and submit's: --study-storage, --study-name and --seed (issue 36), and the
database opened at submit so that a bad one is refused before anything is queued."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_study_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of a sweep's Optuna study (YAML: the sweep's search: storage, study_name and seed)."""
    parser.add_argument("--study-storage", default=None, metavar="URL",
                        help="the sweep's Optuna study in this database (an RDB URL); default: study.journal in "
                             "the sweep's folder, no server")
    parser.add_argument("--study-name", default=None, metavar="NAME",
                        help="with --study-storage: the sweep's trials go into this study, created or continued "
                             "(sweeps on one study share what they learn); default: the sweep's own, NAME-ARRAYID")
    parser.add_argument("--seed", type=int, default=None, metavar="S",
                        help="--search: the sampler's seed (default: drawn at submit, shown and recorded in "
                             "search.json); the training's own seed is --set seed=S")


def with_study(args: argparse.Namespace, sweep, train):  # (Namespace, Sweep, TrainConfig) -> Sweep
    """--study-storage, --study-name and --seed (else the YAML search's storage, study_name and seed) in the sweep:
    the URL made absolute, the name checked, a search's seed drawn when none is given. One line for each that
    does not apply."""
    import dataclasses

    from hpc_train.errors import HpcTrainError
    from hpc_train.spec.search import checked_seed, checked_study_name, drawn_seed

    search = sweep.search
    given = [flag for flag, value in (("--study-storage", args.study_storage), ("--study-name", args.study_name))
             if value is not None]
    if given and search is None and train.prune == "none":
        raise HpcTrainError(f"{given[0]} applies to a sweep with a study: add --search tpe|random|cmaes or "
                            "--prune NAME")
    if args.seed is not None and search is None:
        raise HpcTrainError("--seed seeds a search's sampler: add a range and --search tpe|random|cmaes; the "
                            "training's own seed is --set seed=S")
    if search is not None:  # --seed wins over the YAML's seed:, as a flag over its setting
        search = drawn_seed(search if args.seed is None else dataclasses.replace(search,
                                                                                 seed=checked_seed(args.seed, "--seed")))
    name_source = "--study-name" if args.study_name is not None else "sweep search study_name:"
    name = checked_study_name(args.study_name, name_source) if args.study_name is not None else getattr(
        search, "study", None)
    if args.study_storage is not None:
        url = study_storage(args, args.study_storage, Path.cwd(), "--study-storage", name, train)
    elif search is not None and search.storage is not None:  # the YAML's, relative to its folder
        url = study_storage(args, search.storage, Path(args.config).parent, "sweep search storage:", name, train)
    else:
        url = None
    if name is not None and url is None:
        raise HpcTrainError(f"{name_source} {name}: a named study is shared through a database: add --study-storage "
                            "sqlite:////shared/path/s.db (or postgresql://...); without it each sweep keeps its "
                            "own study.journal")
    return dataclasses.replace(sweep, search=search, storage=url, study=name)


def study_storage(args: argparse.Namespace, given: str, base: Path, source: str, name: str | None, train) -> str:
    """The study's URL with a relative SQLite file made absolute from `base`; on submit (not --dry-run), the
    database opened now, so that a bad URL or an unwritable file is one line before anything is queued, and a
    named study that is there already continued only when it optimizes the same way as this sweep."""
    from hpc_train.errors import HpcTrainError, one_line
    from hpc_train.runs.objective import minimised
    from hpc_train.runs.study import absolute_url, existing_direction, open_storage

    url = absolute_url(given, base)
    if getattr(args, "subcommand", "") != "submit" or getattr(args, "dry_run", False):
        return url
    try:
        open_storage(url)
        existing = existing_direction(url, name) if name is not None else None
    except Exception as error:  # (SQLAlchemy's, a driver's import, the file's: any is the URL's fault here)
        raise HpcTrainError(f"{source} {url}: cannot open it ({one_line(error)}); give an RDB URL this host and "
                            "the nodes can write (sqlite:////shared/path/s.db, postgresql://...), or drop it for "
                            "study.journal in the sweep's folder") from None
    objective = train.objective or "val_accuracy"
    wanted = "minimize" if minimised(objective) else "maximize"
    if existing not in (None, wanted):
        raise HpcTrainError(f"study {name} in {url} is to {existing} its objective, this sweep's {objective} to "
                            f"{wanted}: give another --study-name, or an objective to {existing} (--set "
                            "objective=NAME)")
    return url
