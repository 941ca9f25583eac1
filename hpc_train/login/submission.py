"""Submit a training job through submitit's Slurm executor, or run it here with the mock launcher.

Build the request, then run it: `make_executor` turns a JobSpec into a
submitit executor (nothing submitted), `submission_script` shows exactly what
sbatch would get (`--dry-run`), and `submit` submits and writes the job folder.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import time
from dataclasses import replace
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from hpc_train.config import TrainConfig, to_dict
from hpc_train.errors import HpcTrainError
from hpc_train.injob.epilogue import shell_lines
from hpc_train.runs.folders import RUNS, JobRecord, element_records, run_folder
from hpc_train.injob.prologue import shell_line as prologue_line
from hpc_train.login.script import activation_script, job_config, kill_on_bad_exit, retry_options
from hpc_train.login.request import JobSpec, time_minutes
from hpc_train.login.sweep import Sweep

def make_executor(spec: JobSpec, runs: Path = RUNS, home: str | None = None, config: TrainConfig | None = None,
                  command: Sequence[str] | None = None) -> Any:
    """A submitit SlurmExecutor for the request: folder runs/NAME-%j, one process per rank.

    `home` (--home): the environment the job activates before its ranks start (a checkout's env/activate.sh, with
    the site's modules, or a virtual environment); its python3 then runs them. None: this very Python.
    `config` and `command`: what the job runs, for its retries (max_retries; a command's exits worth a retry).
    """
    import submitit

    python = shlex.quote(sys.executable)
    setup: list[str] = []
    if home is not None:
        setup = [f"source {shlex.quote(str(activation_script(home)))}"]
        python = "python3"  # the activated environment's
    if spec.container:  # each task's Python runs inside the image, with the GPUs passed through
        python = f"apptainer exec --nv {shlex.quote(spec.container)} python3"
    folder = (runs / f"{spec.name}-%j").absolute()
    config = config or TrainConfig()
    setup += before_the_step(python, folder, config.max_retries)
    executor = submitit.SlurmExecutor(folder=str(runs / f"{spec.name}-%j"), python=python)
    extra: dict[str, Any] = {flag: True for flag, wanted in (("exclusive", spec.exclusive), ("hold", spec.hold),
                                                             ("requeue", True)) if wanted}
    extra["open_mode"] = "append"  # a requeued or retried job keeps every attempt in its log
    if spec.gres:
        extra["gres"] = spec.gres
    executor.update_parameters(
        job_name=spec.name, nodes=spec.nodes, ntasks_per_node=spec.tasks_per_node,
        gpus_per_node=spec.gpus_per_node or None, cpus_per_task=spec.cpus_per_task,
        partition=spec.partition, account=spec.account, qos=spec.qos, mem=spec.mem, constraint=spec.constraint,
        # None leaves --time out: the partition's default applies, not submitit's 5 minutes.
        time=time_minutes(spec.time) if spec.time else None,
        additional_parameters=extra,
        # The time-limit warning: submitit asks for USR2 this long before the end; the tasks checkpoint and
        # requeue the job (submitit's own requeueing is not used: the trainer's handlers replace it).
        signal_delay_s=spec.signal_seconds,
        setup=setup,
        # As in the job scripts: a failed task ends a MultiWorkerMirrored step at once (see render).
        srun_args=[f"--kill-on-bad-exit={kill_on_bad_exit(spec)}", "--open-mode=append"],
        teardown=after_the_step(python, folder, spec.strategy, retry_options(spec, config, command)),
    )
    return executor


def job_folder_word(folder: Path) -> str:
    """The job folder, with submitit's %j for the job id, as one shell word: every other character quoted."""
    before, _, after = str(folder).partition("%j")
    return f'{shlex.quote(before)}"$SLURM_JOB_ID"{shlex.quote(after) if after else ""}'


def before_the_step(python: str, folder: Path, max_retries: int) -> list[str]:
    """The batch script's lines before srun: the attempt's start line (where the epilogue reads this attempt's
    srun lines from), then the prologue (prologue.py), which ends the job once its retries are spent."""
    return ['echo "hpc-train: job $SLURM_JOB_ID${SLURM_RESTART_COUNT:+ (restart $SLURM_RESTART_COUNT)} on '
            '$SLURM_JOB_NODELIST" >&2',
            prologue_line(python, job_folder_word(folder), max_retries)]


def after_the_step(python: str, folder: Path, strategy: str, options: Sequence[str] = ()) -> list[str]:
    """The batch script's lines after srun: a retry, or the job's exit code, decided by the one epilogue
    (epilogue.py). `folder` is the job folder with submitit's %j for the job id."""
    return shell_lines(python, job_folder_word(folder), strategy, options)


def submission_script(spec: JobSpec, runs: Path = RUNS, home: str | None = None, config: TrainConfig | None = None,
                      command: Sequence[str] | None = None) -> str:
    """The sbatch script submit would submit (submitit renders it the same way when it submits)."""
    executor = make_executor(spec, runs, home, config, command)
    return executor._make_submission_file_text(executor._submitit_command_str, uid="dry-run")


def submit(spec: JobSpec, train: TrainConfig, runs: Path = RUNS, command: Sequence[str] | None = None,
           home: str | None = None) -> JobRecord:
    """Submit; return the job's record, its folder holding the script and the settings.

    `command`: the user's own command for every rank (under the bootstrap) instead of the trainer;
    `home`: the environment the job activates (see make_executor).
    """
    if shutil.which("sbatch") is None:
        raise HpcTrainError("no Slurm here (sbatch not found): add --local to run the job's tasks on this machine, "
                            "or start a local cluster with hpc-train cluster up")
    from hpc_train.login.preflight import check_request
    from hpc_train.injob.entrypoints import command_task, train_task

    check_request(spec, os.environ)  # never submit what cannot run: a pending-for-ever job wastes a day
    config = job_config(spec, train)
    executor = make_executor(spec, runs, home, config, command)
    try:
        if command:
            job = executor.submit(command_task, list(command), spec.strategy, spec.num_ps, config.max_requeues,
                                  spec.keras, spec.command_signal)
        else:
            job = executor.submit(train_task, to_dict(config))
    except Exception as error:  # submitit wraps sbatch's own complaint
        message = str(error).strip().splitlines()
        raise HpcTrainError(f"sbatch refused the job: {message[-1] if message else error}") from None
    record = JobRecord(job.job_id, spec.name, str(run_folder(runs, spec.name, job.job_id)), spec.nodes, spec.num_tasks,
                       spec.strategy, time.time(), list(command) if command else None)
    _write_folder(record, config)
    return record


def sweep_script(spec: JobSpec, train: TrainConfig, sweep: Sweep, max_parallel: int | None, home: str,
                 runs: Path = RUNS, command: Sequence[str] | None = None) -> str:
    """The job array's script: templates/job.sbatch rendered with every element (render --sweep's)."""
    from hpc_train.login.script import render_script

    return render_script(spec, train, home, runs_dir=str(runs.absolute()), command=command, sweep=sweep,
                         max_parallel=max_parallel)


def submit_sweep(spec: JobSpec, train: TrainConfig, sweep: Sweep, max_parallel: int | None, home: str,
                 runs: Path = RUNS, command: Sequence[str] | None = None) -> JobRecord:
    """Submit a sweep as one job array (one sbatch); its record, and one per element (runs/NAME-ARRAYID_I/)."""
    if shutil.which("sbatch") is None:
        raise HpcTrainError("no Slurm here (sbatch not found): a sweep runs as a job array; start a local cluster "
                            "with hpc-train cluster up")
    from hpc_train.slurm.client import SlurmClient
    from hpc_train.login.preflight import check_request

    check_request(spec, os.environ)
    runs.mkdir(parents=True, exist_ok=True)
    script = runs / f".{spec.name}-sweep-{os.getpid()}.sbatch"
    script.write_text(sweep_script(spec, train, sweep, max_parallel, home, runs, command))
    try:
        array_id = SlurmClient.local(os.environ).submit_script(str(script))
    finally:
        text = script.read_text()
        script.unlink()
    now = time.time()
    record = JobRecord(array_id, spec.name, str(run_folder(runs, spec.name, array_id)), spec.nodes, spec.num_tasks,
                       spec.strategy, now, list(command) if command else None, sweep=array_id,
                       elements=[dict(values) for values in sweep.elements])
    record.write()
    (Path(record.folder) / "sweep.sbatch").write_text(text)
    for element in element_records(record):
        element.write()
    return record


def run_locally(spec: JobSpec, train: TrainConfig, runs: Path = RUNS, command: Sequence[str] | None = None) -> int:
    """The same job, its tasks started on this machine by the mock launcher."""
    from hpc_train.injob.supervisor import CommandJob, supervised_arguments
    from hpc_train.login.mock_srun import Step, launch

    config = job_config(spec, train)
    job_id = f"local-{time.strftime('%Y%m%d-%H%M%S')}"
    folder = run_folder(runs, spec.name, job_id)
    record = JobRecord(job_id, spec.name, str(folder), spec.nodes, spec.num_tasks, spec.strategy, time.time(),
                       list(command) if command else None)
    _write_folder(record, replace(config, output_dir=str(folder)))
    base = dict(os.environ)
    if command:
        base["HPC_TRAIN_RUN_DIR"] = str(folder.resolve())  # the tasks' only: this process's own stays as it was
        job = CommandJob(tuple(command), spec.strategy, spec.num_ps, config.max_requeues, spec.keras,
                         spec.command_signal)
        task_command = [sys.executable, "-m", "hpc_train", *supervised_arguments(job)]
    else:
        task_command = [sys.executable, "-m", "hpc_train.train", "--config", str(folder / "config.yaml")]
    return launch(Step.make(spec.nodes, spec.tasks_per_node), task_command, base,
                  kill_on_bad_exit=bool(kill_on_bad_exit(spec)))


def _write_folder(record: JobRecord, config: TrainConfig) -> None:
    record.write()
    (Path(record.folder) / "config.yaml").write_text(yaml.safe_dump(to_dict(config), sort_keys=False))
