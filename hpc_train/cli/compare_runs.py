"""Compare a sweep's runs (or look at one run): a table sorted by the objective, the best named, a CSV and a PNG.

    hpc-train report ARRAYID [--objective val_accuracy|val_loss|...]
    hpc-train report JOBID

Writes sweep.csv and sweep.png into the sweep's folder (runs/NAME-ARRAYID/): every
element's objective by epoch, and the objective against each swept key. The
objective's direction follows its name (a loss is minimised); default:
val_accuracy where the runs have it, else val_loss.
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("job", metavar="ID", help="a sweep's array id, or a job id")
    parser.add_argument("--objective", default=None, metavar="NAME", help="a figure of metrics.json's epochs")
    parser.add_argument("--export", default=None, metavar="FILE.yaml",
                        help="a sweep: write its best element's (or trial's) settings here, to run again")


def run(args: argparse.Namespace) -> int:
    import os
    from pathlib import Path

    from hpc_train.errors import HpcTrainError
    from hpc_train.runs import compare, trials, views
    from hpc_train.runs.folders import element_folders, find_record
    from hpc_train.slurm.client import SlurmClient
    from hpc_train.slurm.follow import element_states, job_state
    from hpc_train.utilization import summary as utilization

    record = find_record(args.job)
    slurm = SlurmClient.local(os.environ)
    timeline = None  # a packed sweep's pack-timeline.png, once drawn: named with sweep.csv and sweep.png
    if record.is_sweep and record.pack is not None:  # its trials are steps of one job: the pack's state says
        states, timeline = say_pack(record)
        runs = [views.read_run(folder) for folder in element_folders(record)]
    elif record.is_sweep:
        states = element_states(record.job_id, len(record.elements or []), slurm)
        runs = [views.read_run(folder) for folder in element_folders(record)]
    else:
        runs = [views.read_run(Path(record.folder))]  # (a job Slurm forgot: the state its folder says)
        for line in utilization.report_lines(Path(record.folder)):  # a timeline per GPU (utilization/plot.py), also
            print(line)  # for a command that wrote no metrics
        states = {0: "local" if record.is_local else views.known_state(job_state(record.job_id, slurm)[0], runs[0])}
    say_ledger(record)
    if record.is_sweep and not any(run.epochs for run in runs) and \
            trials.has_study(Path(record.folder), element_folders(record)):
        # A command's sweep: its objective is what it reported to the study (hpc_train.report), no metrics.json.
        say_tracked(record)
        return study_report(record, Path(record.folder), args.export, csv=True, timeline=timeline)
    elements, keys = views.report_elements(record, runs, states), views.report_keys(record, runs)
    objective = args.objective or compare.default_objective(elements)
    print("\n".join(compare.report_lines(elements, keys, objective)))
    say_tracked(record)
    if record.is_sweep:
        folder = Path(record.folder)
        (folder / "sweep.csv").write_text(compare.csv_text(elements, keys, objective))
        drawn = compare.plot(elements, keys, objective, folder / "sweep.png")
        print(wrote_line([folder / "sweep.csv", *([folder / "sweep.png"] if drawn else []), *filter(None, [timeline])],
                         "" if drawn else " (no plot: matplotlib is missing; pip install matplotlib)"))
        if args.export and not trials.has_study(folder, element_folders(record)):  # a grid or random sweep:
            export_ranked(record, compare.ranked(elements, objective)[0], objective, args.export)  # its folders
            return study_report(record, folder, None)
        return study_report(record, folder, args.export)
    if args.export:
        raise HpcTrainError(f"--export applies to a sweep (its best element); {args.job} is one job: its settings are "
                            f"its run folder's config.yaml")
    return 0


def say_ledger(record) -> None:  # (JobRecord)
    """ledger.png beside the report: a bar per attempt, or per trial with the sweep's total (runs/ledgerplot.py)."""
    from pathlib import Path

    from hpc_train.runs import ledgerplot
    from hpc_train.runs.folders import element_folders

    folders = element_folders(record) if record.is_sweep else [Path(record.folder)]
    pack = ledgerplot.read_pack_state(Path(record.folder)) if record.pack else None
    if line := ledgerplot.report_line(Path(record.folder), folders, record.is_sweep, pack):
        print(line)


def say_pack(record):  # (JobRecord) -> (each trial's state by index, pack-timeline.png or None)
    """A packed sweep's allocation timeline (pack-timeline.png: which trial ran on which share, when, how it
    ended), drawn beside its report (None where it could not be drawn); its trials' states in Slurm's words."""
    import time
    from pathlib import Path

    from hpc_train.runs import packed

    folder = Path(record.folder)
    state = packed.read_pack_state(folder)
    drawn = packed.draw_timeline(state, folder / packed.TIMELINE, time.time())
    return packed.slurm_states(state, len(record.elements or [])), folder / packed.TIMELINE if drawn else None


def wrote_line(paths, why_fewer: str = "") -> str:  # (list of Path, str) -> str
    """`wrote A, B and C`: every file the report wrote, on one line (pure)."""
    names = [str(path) for path in paths]
    listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
    return f"wrote {listed}{why_fewer}"


def export_ranked(record, best, objective: str, export: str) -> None:  # (JobRecord, compare.Element, ...)
    """A sweep without a study (a grid, a random draw): its best element by the objective (the table's first),
    its settings from its run folder's config.yaml."""
    from pathlib import Path

    from hpc_train.errors import HpcTrainError
    from hpc_train.runs import trials
    from hpc_train.runs.folders import element_folder

    folder = element_folder(record, best.index)
    try:
        trials.export_settings(folder, Path(export), f"the best element ({folder.name}) of sweep {record.job_id} "
                                                     f"by {objective}: {best.last(objective):.4f}")
    except ValueError as error:
        raise HpcTrainError(f"--export {export}: {error}") from None
    print(f"wrote {export}: the best element's settings; run them again with: hpc-train submit --config {export} ...")


def study_report(record, folder, export: str | None, csv: bool = False,  # (JobRecord, Path, ...) -> int
                 timeline=None) -> int:
    """The sweep's Optuna study: its trials ranked, the best, Optuna's plots; --export: the best's settings.
    `csv`: sweep.csv from the study too (a sweep whose runs wrote no metrics.json), named with `timeline` (a packed
    sweep's pack-timeline.png) where it was drawn."""
    from pathlib import Path

    from hpc_train.errors import HpcTrainError
    from hpc_train.runs import trials
    from hpc_train.runs.folders import element_folder, element_folders

    if not trials.has_study(folder, element_folders(record)):
        if export:
            raise HpcTrainError(f"--export: sweep {record.job_id} keeps no study (a grid without --prune); pick "
                                "the best from the table above")
        return 0
    study = trials.load(folder, element_folders(record))
    spec = trials.searched(element_folders(record))
    print("\n".join(trials.lines(study, spec.get("seed") if spec.get("sampler") != "grid" else None)))
    if csv:
        (folder / "sweep.csv").write_text(trials.csv_text(study))
        print(wrote_line([folder / "sweep.csv", *([timeline] if timeline else [])]))
    drawn = trials.plots(study, folder)
    if drawn:
        print(f"wrote {', '.join(str(path) for path in drawn)}")
    if export:
        try:
            trials.export_best(study, lambda index: element_folder(record, index), Path(export))
        except ValueError as error:
            raise HpcTrainError(f"--export {export}: {error}") from None
        print(f"wrote {export}: the best trial's settings; run them again with: hpc-train submit --config {export} ...")
    return 0


def say_tracked(record) -> None:  # (JobRecord)
    """The job's MLflow run (a sweep's: its parent run, a grid's or a search's alike) and where to see it."""
    from pathlib import Path

    from hpc_train.tracking.mlflow_run import tracked_line

    tracked = tracked_line(Path(record.folder), "parent run" if record.is_sweep else "run")
    if tracked:
        print(tracked)
