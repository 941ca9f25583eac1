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


def run(args: argparse.Namespace) -> int:
    import os
    from pathlib import Path

    from hpc_train.cli.status import pruned_or
    from hpc_train.runs import compare
    from hpc_train.slurm.client import SlurmClient
    from hpc_train.slurm.follow import element_states, job_state
    from hpc_train.runs.folders import find_record

    record = find_record(args.job)
    slurm = SlurmClient.local(os.environ)
    if record.is_sweep:
        values = record.elements or []
        states = element_states(record.job_id, len(values), slurm)
        elements = [compare.Element(index, element, pruned_or(states.get(index, "UNKNOWN"),
                                                              Path(f"{record.folder}_{index}")),
                                    compare.read_epochs(Path(f"{record.folder}_{index}")))
                    for index, element in enumerate(values)]
        keys = list(values[0]) if values else []
    else:
        state = "local" if record.is_local else job_state(record.job_id, slurm)[0]
        elements = [compare.Element(0, {}, state, compare.read_epochs(Path(record.folder)))]
        keys = []
    objective = args.objective or compare.default_objective(elements)
    print("\n".join(compare.report_lines(elements, keys, objective)))
    if record.is_sweep:
        folder = Path(record.folder)
        (folder / "sweep.csv").write_text(compare.csv_text(elements, keys, objective))
        drawn = compare.plot(elements, keys, objective, folder / "sweep.png")
        print(f"wrote {folder / 'sweep.csv'}" + (f" and {folder / 'sweep.png'}" if drawn else
                                                 " (no plot: matplotlib is not installed)"))
    return 0
