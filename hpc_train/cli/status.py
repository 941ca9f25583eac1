"""Show a job's state, nodes, elapsed time and last progress line (the newest job by default).

    hpc-train status [JOBID]

Reads sacct where Slurm keeps accounting; elsewhere scontrol or squeue, and says so; a job none of them knows any
more, from its run folder (how it ended, its nodes, its attempts and their time), and says so.
"""

from __future__ import annotations

import argparse
from pathlib import Path

TYPE_CHECKING = False  # (typing itself costs start-up)
if TYPE_CHECKING:
    from hpc_train.runs.folders import JobRecord
    from hpc_train.runs.views import RunFiles, SlurmView
    from hpc_train.slurm.client import SlurmClient


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("job", nargs="?", default=None, metavar="JOBID", help="default: the newest job here")


def slurm_view(record: JobRecord, slurm: SlurmClient, run: RunFiles) -> SlurmView:
    """What Slurm says of the job: sacct's account where there is one, else scontrol's or squeue's; where none of
    them knows it, what its run folder (`run`) says."""
    from hpc_train.runs.views import SlurmView, folder_view
    from hpc_train.slurm.follow import FINAL_STATES, accounted_state, job_info, job_state

    accounted = accounted_state(record.job_id, slurm)
    info = job_info(record.job_id, slurm)
    if accounted is not None:
        state, code, elapsed, requeues = accounted.state, accounted.exit_code, accounted.elapsed, accounted.requeues
        source = "sacct"
    else:
        state, code = job_state(record.job_id, slurm, info)
        if state == "UNKNOWN":  # forgotten (MinJobAge), no accounting: the folder says
            return folder_view(run, record.is_local)
        elapsed, requeues = info.get("RunTime", "?"), int(info.get("Restarts", "0") or 0)
        source = "scontrol/squeue: no Slurm accounting here"
    waiting = ""
    if state.upper() == "PENDING" and info.get("Reason"):
        from hpc_train.slurm.pending import reason_in_words

        waiting = reason_in_words(info["Reason"], record.job_id)
    nodes = info.get("NodeList") or (accounted.nodes if accounted else "")  # once Slurm forgot it, sacct's
    partition = info.get("Partition") or (accounted.partition if accounted else "")  # the one it got, once started
    if record.components and info:  # a heterogeneous job: scontrol says each component's nodes on a line of its own
        parts = slurm.show_job_components(record.job_id)
        nodes = " + ".join(part.get("NodeList", "?") for part in parts)
        # The ranks' last component's partition (the workers'), not the data service's own after it.
        ranks = [part for part, kept in zip(parts, record.components) if kept.get("roles") != ["data service"]]
        partition = (ranks or parts or [info])[-1].get("Partition") or partition
    return SlurmView(state, code, elapsed, requeues, source, nodes, waiting,
                     ended=state.split()[0].upper() in FINAL_STATES, partition=partition)


def data_service_lines(record: JobRecord, seen: SlurmView, slurm: SlurmClient) -> list[str]:
    """The job's tf.data service, each of its processes and its state (runs/servicerecord.py); none without one."""
    from hpc_train.runs.servicerecord import read_service, service_lines

    service = read_service(Path(record.folder))
    if not service:
        return []
    return service_lines(service, None if seen.ended else slurm.running_steps(record.job_id, timeout=10))


def run(args: argparse.Namespace) -> int:
    import os

    from hpc_train.config import DEFAULT_MAX_RETRIES
    from hpc_train.runs import goodput, views
    from hpc_train.runs.folders import element_folders, find_record
    from hpc_train.slurm.client import SlurmClient
    from hpc_train.slurm.follow import element_states
    from hpc_train.utilization import summary as utilization

    record = find_record(args.job)
    slurm = SlurmClient.local(os.environ)
    if record.is_sweep and record.pack is not None:
        from hpc_train.runs import packed

        folders = element_folders(record)
        lines = views.packed_lines(record, [views.read_run(folder) for folder in folders],
                                   packed.read_pack_state(Path(record.folder)),
                                   {index: packed.step_gpus(folder) for index, folder in enumerate(folders)})
    elif record.is_sweep:
        states = element_states(record.job_id, len(record.elements or []), slurm)
        lines = views.sweep_lines(record, [views.read_run(folder) for folder in element_folders(record)], states)
    else:
        run_files = views.read_run(Path(record.folder))
        seen = slurm_view(record, slurm, run_files)
        lines = views.job_lines(record, seen, run_files, views.chief_log(record), DEFAULT_MAX_RETRIES)
        lines += data_service_lines(record, seen, slurm)
    lines += goodput.record_lines(record)  # the goodput ledger's line (runs/goodput.py)
    if not record.is_sweep:
        lines += utilization.status_lines(Path(record.folder))  # its GPUs, busy and idle (utilization/summary.py)
    print("\n".join(lines))
    return 0
