"""Job folders: one per job, `runs/NAME-JOBID/`, holding the submitted script, the settings
snapshot (config.yaml), `job.json`, the logs per rank, and the trainer's output.

A sweep is one job array: its own record in `runs/NAME-ARRAYID/` (the elements' values), and each element a
job of its own, id `ARRAYID_I`, in `runs/NAME-ARRAYID_I/`. Those names are made here and nowhere else (the
batch script's shell spells the same in login/script.py)."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from hpc_train.errors import HpcTrainError

RUNS = Path("runs")
RECORD = "job.json"


@dataclass(frozen=True)
class JobRecord:
    job_id: str
    name: str
    folder: str
    nodes: int
    tasks: int
    strategy: str
    submitted: float  # seconds since the epoch
    # The user's own command every task ran (submit -- COMMAND); None: the trainer.
    command: list[str] | None = None
    # A sweep (one job array): its array id, on the sweep's own record and on each element's ("ARRAYID_I").
    sweep: str | None = None
    # On the sweep's own record: each element's values, by index.
    elements: list[dict] | None = None
    # A heterogeneous job (parameter servers on CPU nodes): each component's partition, nodes, tasks, GPUs per
    # node and roles, in order; None for a job of one component.
    components: list[dict] | None = None

    def write(self) -> None:
        Path(self.folder).mkdir(parents=True, exist_ok=True)
        (Path(self.folder) / RECORD).write_text(json.dumps(asdict(self), indent=2) + "\n")

    @property
    def what(self) -> str:
        """What the job runs, for status and list."""
        import shlex

        return shlex.join(self.command) if self.command else "hpc-train train"

    @property
    def is_sweep(self) -> bool:
        """The record of a whole sweep (its elements have their own)."""
        return self.sweep is not None and self.job_id == self.sweep

    @property
    def is_element(self) -> bool:
        return self.sweep is not None and self.job_id != self.sweep

    @property
    def is_local(self) -> bool:
        """Run here by the mock launcher (submit --local): Slurm never knew it."""
        return self.job_id.startswith("local")

    @property
    def submitted_text(self) -> str:
        return time.strftime("%Y-%m-%d %H:%M", time.localtime(self.submitted))


def run_folder(runs: Path, name: str, job_id: str) -> Path:
    """A job's folder, `runs/NAME-JOBID/` (an element's job id is `ARRAYID_I`)."""
    return runs / f"{name}-{job_id}"


def folders_of(job_id: str, runs: Path = RUNS) -> list[Path]:
    """The folders of a job id, whatever the job's name (one, as a rule; none before it is recorded)."""
    return sorted(runs.glob(run_folder(Path(), "*", job_id).name))


def element_id(array_id: str, index: int | str) -> str:
    """A sweep element's job id, as Slurm names an array's task: `ARRAYID_I` (`index` "INDEX": the pattern)."""
    return f"{array_id}_{index}"


def element_folder(sweep: JobRecord, index: int | str) -> Path:
    """A sweep element's run folder, `runs/NAME-ARRAYID_I/`: the sweep's own, named by the element's id."""
    return run_folder(Path(sweep.folder).parent, sweep.name, element_id(sweep.job_id, index))


def element_folders(sweep: JobRecord) -> list[Path]:
    """Every element's run folder, by index."""
    return [element_folder(sweep, index) for index in range(len(sweep.elements or []))]


def element_records(sweep: JobRecord) -> list[JobRecord]:
    """The records of a sweep's elements, by index: each a job like the sweep's, with its own id and folder."""
    return [replace(sweep, job_id=element_id(sweep.job_id, index), folder=str(element_folder(sweep, index)),
                    elements=None) for index in range(len(sweep.elements or []))]


def all_records(runs: Path = RUNS) -> list[JobRecord]:
    """Every job folder's record, newest first."""
    records = []
    for path in runs.glob(f"*/{RECORD}"):
        try:
            records.append(JobRecord(**json.loads(path.read_text())))
        except (ValueError, TypeError):
            continue  # not one of ours, or damaged: list the rest
    return sorted(records, key=lambda record: record.submitted, reverse=True)


def find_record(job_id: str | None, runs: Path = RUNS) -> JobRecord:
    """The record of a job id, or of the newest job when no id is given."""
    records = all_records(runs)
    if not records:
        raise HpcTrainError(f"no job folders in {runs}/ here; submit one with hpc-train submit, or cd to where you did")
    if job_id is None:
        return records[0]
    for record in records:
        if record.job_id == job_id:
            return record
    raise HpcTrainError(f"no job {job_id} in {runs}/ here (known: {', '.join(r.job_id for r in records[:10])})")


def rank_log(record: JobRecord, rank: int, stream: str = "out") -> Path:
    """A rank's log: submitit's JOBID_RANK_log.out (stdout) or .err (stderr); a sweep element's or a heterogeneous
    job's (a rendered script's), logs/rank-RANK.out, stdout and stderr together."""
    if record.is_element or record.components:  # the rendered script writes stdout and stderr into .out: there is never an .err
        return Path(record.folder) / "logs" / f"rank-{rank}.{stream}"
    return Path(record.folder) / f"{record.job_id}_{rank}_log.{stream}"
