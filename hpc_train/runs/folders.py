"""Job folders: one per job, `runs/NAME-JOBID/`, holding the submitted script, the settings
snapshot (config.yaml), `job.json`, the logs per rank, and the trainer's output.

A sweep is one job array: its own record in `runs/NAME-ARRAYID/` (the elements' values), and each element a
job of its own, id `ARRAYID_I`, in `runs/NAME-ARRAYID_I/`. Those names are made here and nowhere else (the
batch script's shell spells the same in login/script.py)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from hpc_train.errors import HpcTrainError
from hpc_train.runs.secret import PRIVATE_FOLDER

RUNS = Path("runs")
RECORD = "job.json"
PROVENANCE = "provenance.json"  # the code and software a job ran (runs/provenance.py writes it)
# Each rank's log in its job's folder, as srun's --output pattern (%t: the rank): one layout for every job.
RANK_LOG_PATTERN = "logs/rank-%t.out"


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
    # Where the ranks' lines are when they have no logs/ of their own (slurm/*.sh: srun --label into the batch
    # log, "R: " before each line of rank R); None otherwise.
    batch_log: str | None = None
    # A packed sweep (submit --pack: one job, its trials steps in it): the trial share, on the sweep's record and
    # each trial's; None for a job array's.
    pack: dict | None = None

    def write(self) -> None:
        Path(self.folder).mkdir(parents=True, exist_ok=True, mode=PRIVATE_FOLDER)
        (Path(self.folder) / RECORD).write_text(json.dumps(asdict(self), indent=2) + "\n")

    def write_new(self) -> bool:
        """Write the record unless the folder has one (submit's, written meanwhile, stands); whether it did.
        Never half a file: written aside, then linked into place, which fails where one is there."""
        folder = Path(self.folder)
        folder.mkdir(parents=True, exist_ok=True, mode=PRIVATE_FOLDER)
        aside = folder / f".{RECORD}.{os.getpid()}"
        aside.write_text(json.dumps(asdict(self), indent=2) + "\n")
        try:
            os.link(aside, folder / RECORD)
            return True
        except FileExistsError:
            return False
        finally:
            aside.unlink()

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


# An element's run folder as a Slurm filename pattern (an array's job name, array id and index): the folder of
# element_folder, where a submitted sweep's elements keep their batch logs.
ELEMENT_FOLDER_PATTERN = "%x-%A_%a"
ELEMENT_BATCH_LOG = f"{ELEMENT_FOLDER_PATTERN}/slurm-%x-%A_%a.out"


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


def job_id_of(folder: Path, env: Mapping[str, str]) -> str:
    """The id of the job running in `folder`: Slurm's, else the local one its name ends in (NAME-local-...) (pure)."""
    return env.get("SLURM_JOB_ID") or "local" + folder.name.partition("-local")[2]


def nodes_and_tasks(env: Mapping[str, str], tasks: int, components: int = 1) -> tuple[str, str]:
    """An attempt's nodes and tasks as its start line says them: Slurm's, each component's of a heterogeneous job
    (`components` > 1: the batch shell's plain variables are component 0's only), else "this machine" (pure)."""
    if components > 1:
        numbers = range(components)
        return (" + ".join(env.get(f"SLURM_JOB_NODELIST_HET_GROUP_{index}", "?") for index in numbers),
                "+".join(env.get(f"SLURM_NTASKS_HET_GROUP_{index}", "?") for index in numbers))
    return env.get("SLURM_JOB_NODELIST") or "this machine", env.get("SLURM_NTASKS") or str(tasks)


def started_record(folder: Path, env: Mapping[str, str], strategy: str, nodes: int, tasks: int,
                   command: list[str] | None, now: float) -> JobRecord:
    """The record of a job in `folder` as its own batch script knows it (sbatch of a rendered script, the starter's,
    slurm/*.sh; a job run here without Slurm): Slurm's variables where there are any, else `nodes` and `tasks`;
    an array's task is the element ARRAYID_I of the sweep ARRAYID. `submitted`: when it started (pure)."""
    array, index = env.get("SLURM_ARRAY_JOB_ID"), env.get("SLURM_ARRAY_TASK_ID")
    job_id = element_id(array, index) if array and index else job_id_of(folder, env)
    name = env.get("SLURM_JOB_NAME") or folder.name.removesuffix(f"-{job_id}")
    started = env.get("SLURM_JOB_START_TIME", "")
    parts = het_components(env)
    if parts:  # the batch shell's plain variables are component 0's alone
        nodes, tasks = sum(part["nodes"] for part in parts), sum(part["tasks"] for part in parts)
    else:
        nodes, tasks = int(env.get("SLURM_JOB_NUM_NODES") or nodes), int(env.get("SLURM_NTASKS") or tasks)
    return JobRecord(job_id, name, str(folder), nodes, tasks, strategy, float(started) if started.isdigit() else now,
                     command, sweep=array if array and index else None, components=parts or None)


def het_components(env: Mapping[str, str]) -> list[dict[str, Any]]:
    """A heterogeneous job's components as its batch shell sees them (SLURM_HET_SIZE > 1; [] for a plain job):
    partition, nodes, tasks, GPUs per node where Slurm says, and the roles hpc-train gives them (component 0 the
    chief and the ps, the others workers) (pure)."""
    import hostlist

    size = env.get("SLURM_HET_SIZE", "")
    if not size.isdigit() or int(size) < 2:
        return []
    parts = []
    for number in range(int(size)):
        own = {name: env.get(f"SLURM_{name}_HET_GROUP_{number}", "") for name in
               ("JOB_PARTITION", "JOB_NODELIST", "NTASKS", "GPUS_PER_NODE")}
        gpus = own["GPUS_PER_NODE"].rpartition(":")[2]  # "2" or "a100:2"
        parts.append({"partition": own["JOB_PARTITION"] or None,
                      "nodes": len(hostlist.expand_hostlist(own["JOB_NODELIST"])) if own["JOB_NODELIST"] else 0,
                      "tasks": int(own["NTASKS"] or 0), "gpus_per_node": int(gpus) if gpus.isdigit() else None,
                      "roles": ["chief", "ps"] if number == 0 else ["worker"]})
    return parts


def element_values(env: Mapping[str, str]) -> dict[str, Any]:
    """A sweep element's values, as its batch script exports them (HPC_TRAIN_SWEEP_<KEY>=VALUE; pure)."""
    import yaml

    prefix = "HPC_TRAIN_SWEEP_"
    return {key[len(prefix):].lower(): _value(yaml.safe_load, text) for key, text in sorted(env.items())
            if key.startswith(prefix)}


def _value(read: Any, text: str) -> Any:
    try:
        value = read(text)
    except ValueError:  # (yaml's errors are ValueErrors)
        return text
    return value if isinstance(value, (int, float, str, bool)) else text


def note_element(element: JobRecord, count: int, values: dict[str, Any]) -> None:
    """A sweep started with sbatch has no record of its own until its elements start: each element makes it
    (`count` elements, each's values {} until that element has started) and adds its own values."""
    import fcntl

    assert element.sweep is not None
    index = int(element.job_id.rpartition("_")[2])
    folder = run_folder(Path(element.folder).parent, element.name, element.sweep)
    folder.mkdir(parents=True, exist_ok=True, mode=PRIVATE_FOLDER)
    with open(folder / f".{RECORD}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the array's elements start together
        try:
            sweep = JobRecord(**json.loads((folder / RECORD).read_text()))
        except (OSError, ValueError, TypeError):
            sweep = replace(element, job_id=element.sweep, folder=str(folder), elements=[])
        elements = [*(sweep.elements or []), *([{}] * max(0, max(count, index + 1) - len(sweep.elements or [])))]
        if not elements[index]:
            elements[index] = values
            replace(sweep, elements=elements).write()


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


def rank_text(record: JobRecord, rank: int) -> str | None:
    """Everything rank `rank` wrote so far: its own log (stdout, then stderr where apart), or its labelled lines of
    the batch log (their "R: " dropped); None before there is any."""
    own = [rank_log(record, rank, stream) for stream in ("out", "err")]
    if any(path.is_file() for path in own):
        return "".join(path.read_text(errors="replace") for path in own if path.is_file())
    batch = Path(record.batch_log) if record.batch_log else None
    if batch is None or not batch.is_file():
        return None
    label = f"{rank}: "
    return "".join(line[len(label):] for line in batch.read_text(errors="replace").splitlines(keepends=True)
                   if line.startswith(label))


def rank_log(record: JobRecord, rank: int, stream: str = "out") -> Path:
    """A rank's log: logs/rank-RANK.out, stdout and stderr together (srun --output=RANK_LOG_PATTERN), however the
    job started; there is never an .err. A job submitted before that layout kept submitit's JOBID_RANK_log.out
    (stdout) and .err (stderr): those are read where they are and the new one is not."""
    old = Path(record.folder) / f"{record.job_id}_{rank}_log.{stream}"
    if not record.is_element and old.is_file() and not (Path(record.folder) / RANK_LOG_PATTERN).parent.is_dir():
        return old
    return Path(record.folder) / RANK_LOG_PATTERN.replace("%t", str(rank)).replace(".out", f".{stream}")
