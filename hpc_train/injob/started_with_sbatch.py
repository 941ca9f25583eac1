"""A job's record in its run folder when nothing wrote one: job.json and provenance.json for a job started with
sbatch (a rendered script, the starter's, slurm/*.sh) or run here, so that it is followed as a submitted one; and its
own log, where Slurm writes it elsewhere, linked into its run folder (runs/joblog.py: its one place)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hpc_train.runs.joblog import job_log_path, link_job_log
from hpc_train.slurm.client import SlurmClient


@dataclass(frozen=True)
class JobShape:
    """What job.json says of the step: its strategy, nodes and tasks, a user's command, and whether every rank's
    lines go into the batch log (srun labels them there: the record says where that log is)."""

    strategy: str
    nodes: int
    tasks: int
    user_command: list[str] | None
    labelled_batch_log: bool
    under_slurm: bool = False

    @classmethod
    def of(cls, body: Any, rank_command: Sequence[str], under_slurm: bool) -> "JobShape":
        """From the job body's settings (injob/body.py's JobBody) and the rank command it runs."""
        command = list(rank_command)
        user_command = command[command.index("--") + 1:] if body.command and "--" in command else None
        return cls(body.strategy, body.nodes, body.nodes * body.tasks_per_node, user_command,
                   body.output is None and under_slurm, under_slurm)


def record_job(run_dir: Path, shape: JobShape, env: Mapping[str, str], now: float) -> None:
    """The run folder's job.json, unless it has one (submit writes its own), its provenance.json beside it; a
    sweep element's also makes or completes its sweep's."""
    from hpc_train.runs.provenance import provenance, record_job_versions, write_provenance
    from hpc_train.runs.folders import element_values, note_element, started_record

    record = started_record(run_dir, env, shape.strategy, shape.nodes, shape.tasks, shape.user_command, now)
    written = None  # (Slurm's word on where the job's own log is, asked once, where needed)
    if shape.labelled_batch_log or (shape.under_slurm and not job_log_path(run_dir).exists()):
        written = SlurmClient.local(env).show_job(env["SLURM_JOB_ID"]).get("StdOut")
    if shape.under_slurm:
        link_job_log(run_dir, written)
    if shape.labelled_batch_log:
        record = replace(record, batch_log=written)
    if not record.write_new():
        return record_job_versions(run_dir)  # submit's provenance.json: this Python's versions, not submit's
    write_provenance(run_dir, *provenance(None, Path.cwd()))  # no snapshot: the code on disk, git's word on it
    if record.is_element:
        count = env.get("SLURM_ARRAY_TASK_COUNT") or str(int(env.get("SLURM_ARRAY_TASK_MAX") or -1) + 1)
        note_element(record, int(count), element_values(env))
