"""The job body's one line, `hpc-train job [options] -- RANK_COMMAND`, as values (pure): what a batch script asks of
the body (JobBody) and the line's words, written by the login side (render, submit, --local) and read back by the
body itself (injob/jobline.py: parse)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from hpc_train.container.runtime import Container
from hpc_train.spec.data_service import DataService


@dataclass(frozen=True)
class JobBody:
    """What one batch script asks of the body: where the run is, how its step runs, and how failures retry."""

    run_dir: Path
    strategy: str = "multiworker"
    nodes: int = 1  # the step's nodes and tasks when the mock launcher runs it (srun takes the job's own)
    tasks_per_node: int = 1
    max_retries: int | None = None  # None: state.json's, else the default
    retry_exit_codes: tuple[int, ...] = ()
    command: bool = False  # the ranks run a user's command (the epilogue reads its exits so)
    output: str | None = None  # srun --output (rank logs, %t the rank); None: every rank into the job log, labelled
    error: str | None = None  # srun --error; None: with the output
    hang_minutes: float | None = None  # the watchdog's threshold (watchdog.py); None: from the run's pace; 0: off
    track: str = "none"  # mlflow: one MLflow run per job (hpc_train/tracking), opened here before the ranks start
    tracking_uri: str | None = None  # None: MLFLOW_TRACKING_URI, else runs/mlflow.db
    experiment: str | None = None  # None: the job's name
    node_range: str | None = None  # --nodes MIN-MAX: each attempt runs on the nodes it got (sizing.py); None: fixed
    gpus_per_node: int = 0  # the mock launcher's (--local): its GPUs bound as Slurm would; srun takes the job's
    num_ps: int = 1  # (which ranks compute, and get GPUs, under parameter_server)
    container: Container | None = None  # every rank runs in this image (docs/containers.md); the body stays out
    data_service: DataService | None = None  # a tf.data service started beside the step (injob/dataservice.py)


def words(body: JobBody) -> list[str]:
    """The job line's options for `body` (every one but the run folder and the rank logs, which the caller says), as
    argv words: `hpc-train job --run-dir DIR WORDS -- COMMAND` (injob/jobline.py reads them back)."""
    return ["--nodes", str(body.nodes), "--ntasks-per-node", str(body.tasks_per_node), "--strategy",
            body.strategy, *(("--max-retries", str(body.max_retries)) if body.max_retries is not None else ()),
            *(("--retry-exit-codes", ",".join(map(str, body.retry_exit_codes))) if body.retry_exit_codes else ()),
            *(("--command",) if body.command else ()),
            *(("--hang-minutes", f"{body.hang_minutes:g}") if body.hang_minutes is not None else ()),
            *(("--track", body.track) if body.track != "none" else ()),
            *(("--tracking-uri", body.tracking_uri) if body.tracking_uri and body.track != "none" else ()),
            *(("--experiment", body.experiment) if body.experiment and body.track != "none" else ()),
            *(("--container", body.container.image, "--container-runtime", body.container.runtime)
              if body.container else ()),
            *(("--node-range", body.node_range) if body.node_range else ()),
            # Without Slurm (`bash job.sbatch`) the mock launcher binds the GPUs as Slurm would: it needs them.
            *(("--gpus-per-node", str(body.gpus_per_node)) if body.gpus_per_node else ()),
            *(("--num-ps", str(body.num_ps)) if body.num_ps != 1 else ()),
            *(body.data_service.job_line_options() if body.data_service else ())]


def script_line(program: str, run_dir: str, body: JobBody, rank_command: str, output: str | None = None,
                error: str | None = None) -> str:
    """A batch script's one line that hands the job to the body: `exec PROGRAM job ... -- RANK_COMMAND`.

    `program` (hpc-train, or PYTHON -m hpc_train) and `rank_command` are shell text, quoted by the caller;
    `run_dir`, `output` and `error` are shell words (they may expand "$run_dir" or "$SLURM_JOB_ID"), used
    instead of the body's own; every other value is quoted here."""
    logs = "".join(f" --{name} {word}" for name, word in (("output", output), ("error", error)) if word)
    return f"exec {program} job --run-dir {run_dir} {shlex.join(words(body))}{logs} -- \\\n  {rank_command}"
