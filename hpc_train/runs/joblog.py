"""A job's own log: its batch script's output (the job body's start line, each attempt, a retry, the epilogue's
words, a requeue), apart from its ranks' logs/rank-R.out, in one place whatever submitted the job:
`runs/NAME-JOBID/slurm-NAME-JOBID.out` (a sweep's element: `runs/NAME-ARRAYID_I/slurm-NAME-ARRAYID_I.out`), its run
folder's name after `slurm-`.

Slurm opens this log before the script runs, so its folder must exist by then. `submit` puts it there (`BATCH_LOG`):
submitit's job and a sweep's or a pack's script are submitted with it, their folder made before the job can start;
a job whose script reached sbatch without its folder (render's, the starter's or slurm/*.sh given to sbatch by hand,
submit's heterogeneous job or one without a time-limit warning) has Slurm write `slurm-NAME-JOBID.out` where sbatch
ran, and its job body links that file into the run folder as it starts (`link_job_log`). `hpc-train logs JOBID --job`
prints it (docs/jobs.md, "A job's own log"), and still reads the places of jobs submitted before: submitit's own
`JOBID_0_log.err` and `.out`, the log a job started by sbatch recorded, and where a rendered script was submitted.
"""

from __future__ import annotations

from pathlib import Path

from hpc_train.runs.folders import JobRecord

# The job's own log as a Slurm filename pattern under the runs folder (sbatch --output): its run folder's name,
# NAME-JOBID, after `slurm-`; an element's is runs/folders.py's ELEMENT_BATCH_LOG.
BATCH_LOG = "%x-%j/slurm-%x-%j.out"


def job_log_path(folder: Path) -> Path:
    """THE place of the job's own log: `slurm-FOLDER.out` in its run folder (a file, or a link to where Slurm
    writes it) (pure)."""
    return folder / f"slurm-{folder.name}.out"


def job_log_places(record: JobRecord) -> list[Path]:
    """Where the job's own log may be, in the order looked at (pure): its one place, then where a job submitted
    before put it: submitit's two files in the run folder, the log a job started by sbatch recorded, and
    `slurm-FOLDER.out` where a rendered script is submitted from (the runs folder's parent)."""
    folder = Path(record.folder)
    places = [job_log_path(folder), folder / f"{record.job_id}_0_log.err", folder / f"{record.job_id}_0_log.out"]
    if record.batch_log:
        places.append(Path(record.batch_log))
    places.append(folder.parent.parent / job_log_path(folder).name)
    return list(dict.fromkeys(places))


def job_log(record: JobRecord) -> list[Path]:
    """The job's own log files there are: its one place (a link there counts once, for the file it names), else the
    old places (an old submitit job's is two: stderr holds the job body's lines)."""
    found = [path for path in job_log_places(record) if path.is_file()]
    return found[:1] if found and found[0] == job_log_path(Path(record.folder)) else found


def link_job_log(folder: Path, written: str | None) -> bool:
    """Link the job's own log into its run folder, where Slurm writes it elsewhere (`written`: Slurm's StdOut of
    the job); True when the run folder now has it. Nothing is done where it is already there."""
    place = job_log_path(folder)
    if place.exists() or place.is_symlink():
        return True
    if not written or not Path(written).is_absolute() or Path(written) == place:
        return False
    try:
        place.symlink_to(written)
    except FileExistsError:  # (another attempt's, just now)
        pass
    return True
