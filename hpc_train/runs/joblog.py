"""A job's own log: its batch script's output (the job body's start line, each attempt, a retry, the epilogue's
words, a requeue), apart from its ranks' logs/rank-R.out, found wherever what submitted it put it.

Slurm opens this log before the script runs, so its folder must exist by then: hpc-train puts it in the run folder
where it makes that folder first (a sweep's element, a packed sweep: `slurm-NAME-JOBID.out` there, the folders made
while the job is held), submitit where it always does (`runs/NAME-JOBID/JOBID_0_log.out` and `.err`, its own
naming: submit's plain jobs), and a script given to sbatch by hand (render's, the starter's, slurm/*.sh) where
sbatch ran (`slurm-NAME-JOBID.out`, its `#SBATCH --output`). `hpc-train logs JOBID --job` reads it from any of
them (docs/jobs.md, "A job's own log").
"""

from __future__ import annotations

from pathlib import Path

from hpc_train.runs.folders import JobRecord


def job_log_places(record: JobRecord) -> list[Path]:
    """Where the job's own log may be, in the order looked at (pure): submitit's two files in the run folder, then
    `slurm-FOLDER.out` in it (a sweep's element, a packed sweep), the log a job started by sbatch recorded, then
    `slurm-FOLDER.out` where a rendered script is submitted from (the runs folder's parent)."""
    folder = Path(record.folder)
    own = f"slurm-{folder.name}.out"  # (%x-%j of a job, %x-%A_%a of an element: the run folder's own name)
    places = [folder / f"{record.job_id}_0_log.err", folder / f"{record.job_id}_0_log.out", folder / own]
    if record.batch_log:
        places.append(Path(record.batch_log))
    places.append(folder.parent.parent / own)
    return list(dict.fromkeys(places))


def job_log(record: JobRecord) -> list[Path]:
    """The job's own log files there are (submitit's is two: stderr holds the job body's lines)."""
    return [path for path in job_log_places(record) if path.is_file()]
