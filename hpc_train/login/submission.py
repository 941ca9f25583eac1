"""Submit a training job through submitit's Slurm executor, or run it here with the mock launcher.

Build the request, then run it: `make_executor` turns a JobRequest into a
submitit executor (nothing submitted) whose script hands the job to hpc-train's
job body (hpc_train/injob/body.py), `submission_script` shows exactly what
sbatch gets (`--dry-run`: submitted to a recording sbatch), and `submit`
submits and writes the job folder. Only submitit's public API is used
(SlurmExecutor, update_parameters, submit).
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from hpc_train.config import TrainConfig, to_dict
from hpc_train.errors import HpcTrainError
from hpc_train.injob.jobline import script_line
from hpc_train.runs.provenance import write_provenance
from hpc_train.runs.state import write_text_atomically
from hpc_train.runs.folders import (ELEMENT_BATCH_LOG, RANK_LOG_PATTERN, RUNS, JobRecord, element_records,
                                    run_folder)
from hpc_train.login.script import activation_script, code_lines, config_lines, job_body, job_config, tasks_per_node
from hpc_train.runs.snapshot import JobCode
from hpc_train.login.request import JobRequest, time_minutes
from hpc_train.spec.sweep import Sweep


def make_executor(spec: JobRequest, train: TrainConfig, runs: Path = RUNS, home: str | None = None,
                  command: Sequence[str] | None = None, code: JobCode | None = None) -> Any:
    """A submitit SlurmExecutor for the request: folder runs/NAME-%j, whose script runs the job body.

    `home` (--home): the environment the job activates before the body and its ranks start (a checkout's
    env/activate.sh, with the site's modules, or a virtual environment); its python3 then runs them. None: this
    very Python. With a container, the body runs there and runs each rank in the image (injob/contained.py).
    `command`: the user's own command for every rank (under the bootstrap) instead of the trainer.
    `code`: the snapshot every attempt runs in (None: the code on disk, in the directory submitted from).
    """
    import submitit

    python = shlex.quote(sys.executable)
    setup: list[str] = []
    if home is not None:
        setup = [f"source {shlex.quote(str(activation_script(home)))}"]
        python = "python3"  # the activated environment's
    executor = submitit.SlurmExecutor(folder=str(runs / f"{spec.name}-%j"), python=python)
    group = spec.group  # (submitit writes one group's #SBATCH lines: a heterogeneous job is refused here)
    extra: dict[str, Any] = {flag: True for flag, wanted in (("exclusive", group.exclusive), ("hold", spec.hold),
                                                             ("requeue", True)) if wanted}
    if group.gres:
        extra["gres"] = group.gres
    extra |= sbatch_parameters(spec)
    per_node = tasks_per_node(group)  # a node range: no --ntasks-per-node (script.py says why)
    extra |= {"mincpus": per_node["mincpus"]} if "mincpus" in per_node else {}
    # submitit counts its tasks with `nodes` (an int): a range's MIN-MAX reaches the #SBATCH line as an extra.
    extra |= {"nodes": str(group.node_range)} if group.ranged else {}
    executor.update_parameters(
        job_name=spec.name, nodes=group.nodes,
        **({"ntasks_per_node": per_node["ntasks-per-node"]} if "ntasks-per-node" in per_node else {}),
        gpus_per_node=group.gpus_per_node or None, cpus_per_task=group.cpus_per_task, partition=group.partition,
        account=spec.account, qos=spec.qos, mem=group.mem, constraint=group.constraint,
        # None leaves --time out: the partition's default applies, not submitit's 5 minutes.
        time=time_minutes(spec.time) if spec.time else None,
        additional_parameters=extra,  # (submitit appends to the logs itself: a requeued job keeps every attempt)
        # The time-limit warning: submitit asks for USR2 this long before the end; the tasks checkpoint and
        # requeue the job (submitit's own requeueing is not used: the trainer's handlers replace it).
        signal_delay_s=spec.signal_seconds,
        setup=[*setup, *body_lines(spec, job_config(spec, train), (runs / f"{spec.name}-%j").absolute(), python,
                                   command, code)],
    )
    return executor


def sbatch_parameters(spec: JobRequest) -> dict[str, Any]:
    """--after/--dependency and --sbatch's options as submitit's additional parameters (it quotes each value; its
    own name for one, with `_`, so that ours replaces its: wckey)."""
    options = {name.replace("-", "_"): True if value is None else value for name, value in spec.sbatch}
    return {**options, **({"dependency": spec.dependency} if spec.dependency else {})}


def job_folder_word(folder: Path) -> str:
    """The job folder, with submitit's %j for the job id, as one shell word: every other character quoted."""
    before, _, after = str(folder).partition("%j")
    return f'{shlex.quote(before)}"$SLURM_JOB_ID"{shlex.quote(after) if after else ""}'


def body_lines(spec: JobRequest, config: TrainConfig, folder: Path, python: str,
               command: Sequence[str] | None, code: JobCode | None = None) -> list[str]:
    """The script's setup: the settings into the job folder, then the job body in this shell's place (`exec`),
    so that submitit's own srun line after it never runs. Its ranks log as every job's do (logs/rank-N.out,
    stdout and stderr together: runs/folders.rank_log); submitit's own files keep the batch script's log."""
    from hpc_train.login.script import task_command

    return [f"run_dir={job_folder_word(folder)}", 'mkdir -p "$run_dir/logs"', config_lines(config),
            *code_lines(code),
            "# hpc-train's job body (hpc_train/injob/body.py) replaces this shell: submitit's srun line never runs.",
            script_line(f"{python} -m hpc_train", '"$run_dir"', job_body(spec, config, command),
                        task_command(spec, config, command, f"{python} -u -m hpc_train"),
                        output=shlex.quote(str(folder / RANK_LOG_PATTERN)))]


@contextmanager
def chdir(folder: Path) -> Iterator[None]:
    """contextlib.chdir is Python 3.11+; this project promises 3.10."""
    before = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


@contextmanager
def recording_sbatch(runs: Path) -> Iterator[Path]:
    """While it lasts, `sbatch` is a script first on PATH that keeps the script it is given (in the file
    yielded) and answers a job id; what submitit leaves in `runs` meanwhile is removed afterwards."""
    runs = runs.absolute()
    before = set(runs.iterdir()) if runs.is_dir() else None
    path = os.environ.get("PATH", "")
    with tempfile.TemporaryDirectory(prefix="hpc-train-dry-run-") as folder:
        recorded = Path(folder) / "submitted.sbatch"
        sbatch = Path(folder) / "sbatch"
        sbatch.write_text(f'#!/bin/sh\ncp "$1" {shlex.quote(str(recorded))}\necho "Submitted batch job 1"\n')
        sbatch.chmod(0o755)
        os.environ["PATH"] = f"{folder}{os.pathsep}{path}"
        try:
            yield recorded
        finally:
            os.environ["PATH"] = path
            _remove_new(runs, before or set())
            if before is None and runs.is_dir() and not any(runs.iterdir()):
                runs.rmdir()


def _remove_new(folder: Path, before: set[Path]) -> None:
    for entry in (set(folder.iterdir()) - before) if folder.is_dir() else ():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def submission_script(spec: JobRequest, train: TrainConfig, runs: Path = RUNS, home: str | None = None,
                      command: Sequence[str] | None = None, code: JobCode | None = None) -> str:
    """The sbatch script submit would submit, as submitit writes it: handed to a recording sbatch, nothing queued."""
    from hpc_train.injob.entrypoints import body_runs_the_ranks

    if spec.heterogeneous:
        from hpc_train.login.script import render_script

        return render_script(spec, train, home or default_home_text(), runs_dir=str(runs.absolute()),
                             command=command, code=code)
    executor = make_executor(spec, train, runs, home, command, code)
    with recording_sbatch(runs) as recorded:
        executor.submit(body_runs_the_ranks)
        return recorded.read_text()


def submit(spec: JobRequest, train: TrainConfig, runs: Path = RUNS, command: Sequence[str] | None = None,
           home: str | None = None, code: JobCode | None = None) -> JobRecord:
    """Submit; return the job's record, its folder holding the script and the settings.

    `command`: the user's own command for every rank (under the bootstrap) instead of the trainer;
    `home`: the environment the job activates; `code`: the snapshot it runs (see make_executor).
    """
    if shutil.which("sbatch") is None:
        raise HpcTrainError("no Slurm here (sbatch not found): add --local to run the job's tasks on this machine, "
                            "or start a local cluster with hpc-train cluster up")
    from hpc_train.login.preflight import check_request
    from hpc_train.injob.entrypoints import body_runs_the_ranks

    check_request(spec, os.environ)  # never submit what cannot run: a pending-for-ever job wastes a day
    if spec.heterogeneous:
        return _submit_rendered(spec, train, runs, command, home, code)
    config = job_config(spec, train)
    executor = make_executor(spec, train, runs, home, command, code)
    try:
        job = executor.submit(body_runs_the_ranks)
    except Exception as error:  # submitit wraps sbatch's own complaint
        message = str(error).strip().splitlines()
        raise HpcTrainError(f"sbatch refused the job: {message[-1] if message else error}") from None
    record = JobRecord(job.job_id, spec.name, str(run_folder(runs, spec.name, job.job_id)), spec.nodes, spec.num_tasks,
                       spec.strategy, time.time(), list(command) if command else None)
    _write_folder(record, config, code)
    return record


def _submit_rendered(spec: JobRequest, train: TrainConfig, runs: Path, command: Sequence[str] | None,
                     home: str | None, code: JobCode | None = None) -> JobRecord:
    """A heterogeneous job: submitit writes one group's #SBATCH lines only, so the rendered script (render's,
    `#SBATCH hetjob` between the groups) goes to sbatch through the Slurm client; the id is the het leader's."""
    from hpc_train.login.script import render_script
    from hpc_train.slurm.client import SlurmClient

    # As a plain submit's job runs hpc-train: this very Python, unless --home names the environment to activate.
    program = "hpc-train" if home else f"{shlex.quote(sys.executable)} -m hpc_train"
    script = render_script(spec, train, home or default_home_text(), runs_dir=str(runs.absolute()), command=command,
                           program=program, code=code)
    job_id = SlurmClient.local(os.environ).submit_text(script, cwd=os.getcwd())
    record = JobRecord(job_id, spec.name, str(run_folder(runs, spec.name, job_id)), spec.nodes, spec.num_tasks,
                       spec.strategy, time.time(), list(command) if command else None,
                       components=components(spec))
    _write_folder(record, job_config(spec, train), code)
    return record


def components(spec: JobRequest) -> list[dict]:
    """What a job record keeps of each group: what status shows per component."""
    return [{"partition": group.partition, "nodes": group.nodes, "tasks": group.num_tasks,
             "gpus_per_node": group.gpus_per_node, "roles": list(group.roles)} for group in spec.groups]


def default_home_text() -> str:
    """What a rendered script activates when no --home is given: this Python's environment."""
    return sys.prefix


def sweep_script(spec: JobRequest, train: TrainConfig, sweep: Sweep, max_parallel: int | None, home: str,
                 runs: Path = RUNS, command: Sequence[str] | None = None, code: JobCode | None = None) -> str:
    """The job array's script: templates/job.sbatch rendered with every element (render --sweep's), each
    element's batch log in its own run folder (submit_sweep makes the folders before any element starts)."""
    from hpc_train.login.script import render_script

    return render_script(spec, train, home, runs_dir=str(runs.absolute()), command=command, sweep=sweep,
                         max_parallel=max_parallel, batch_log=str(runs.absolute() / ELEMENT_BATCH_LOG), code=code)


def submit_sweep(spec: JobRequest, train: TrainConfig, sweep: Sweep, max_parallel: int | None, home: str,
                 runs: Path = RUNS, command: Sequence[str] | None = None, code: JobCode | None = None) -> JobRecord:
    """Submit a sweep as one job array (one sbatch); its record, and one per element (runs/NAME-ARRAYID_I/).

    The array is submitted held and released once every element's folder is there: Slurm opens an element's
    batch log, in that folder, before its script runs. (--hold: it stays held, for the user's scontrol release.)
    Every element runs the one snapshot, `code`."""
    if shutil.which("sbatch") is None:
        raise HpcTrainError("no Slurm here (sbatch not found): a sweep runs as a job array; start a local cluster "
                            "with hpc-train cluster up")
    from hpc_train.slurm.client import SlurmClient
    from hpc_train.login.preflight import check_request

    check_request(spec, os.environ)
    runs.mkdir(parents=True, exist_ok=True)
    script = runs / f".{spec.name}-sweep-{os.getpid()}.sbatch"
    script.write_text(sweep_script(spec, train, sweep, max_parallel, home, runs, command, code))
    slurm = SlurmClient.local(os.environ)
    try:
        array_id = slurm.submit_script(str(script), options=("--hold",))
    finally:
        text = script.read_text()
        script.unlink()
    now = time.time()
    record = JobRecord(array_id, spec.name, str(run_folder(runs, spec.name, array_id)), spec.nodes, spec.num_tasks,
                       spec.strategy, now, list(command) if command else None, sweep=array_id,
                       elements=[dict(values) for values in sweep.elements])
    write_while_held(slurm, spec, record, element_records(record), code, "sweep", text)
    return record


def write_while_held(slurm: Any, spec: JobRequest, record: JobRecord, elements: Sequence[JobRecord],
                     code: JobCode | None, what: str, script: str | None = None) -> None:
    """A sweep's record, its script (`script`: sweep.sbatch), its elements' records and everyone's provenance,
    written while its job is held; then released (not with --hold), since Slurm opens a batch log in those folders
    before the script runs. One line when the release fails."""
    try:
        record.write()
        if script is not None:
            (Path(record.folder) / "sweep.sbatch").write_text(script)
        for element in elements:
            element.write()
        for folder in [record.folder, *(element.folder for element in elements)]:
            write_provenance(Path(folder), *provenance(code))
    finally:
        refused = None if spec.hold else slurm.release(record.job_id)
    if refused:
        raise HpcTrainError(f"{what} {record.job_id} was submitted held and scontrol release {record.job_id} failed "
                            f"({refused}); release it with: scontrol release {record.job_id}")


def submit_pack(spec: JobRequest, train: TrainConfig, sweep: Sweep, max_parallel: int | None, home: str,
                runs: Path = RUNS, command: Sequence[str] | None = None, code: JobCode | None = None) -> JobRecord:
    """Submit a packed sweep: ONE job (one sbatch) whose body runs the trials as steps (injob/pack); its record,
    and one per trial (runs/NAME-JOBID_I/), written while the job is held, its batch log in its own folder."""
    if shutil.which("sbatch") is None:
        raise HpcTrainError("no Slurm here (sbatch not found): a packed sweep runs as one Slurm job; start a local "
                            "cluster with hpc-train cluster up")
    from hpc_train.login.packscript import render_pack
    from hpc_train.login.preflight import check_request
    from hpc_train.slurm.client import SlurmClient

    check_request(spec, os.environ)
    runs.mkdir(parents=True, exist_ok=True)
    text = render_pack(spec, train, home, sweep, runs_dir=str(runs.absolute()), command=command,
                       max_parallel=max_parallel, batch_log=str(runs.absolute() / "%x-%j" / "slurm-%x-%j.out"),
                       code=code)
    script = runs / f".{spec.name}-pack-{os.getpid()}.sbatch"
    script.write_text(text)
    slurm = SlurmClient.local(os.environ)
    try:
        job_id = slurm.submit_script(str(script), options=("--hold",))
    finally:
        script.unlink()
    record = JobRecord(job_id, spec.name, str(run_folder(runs, spec.name, job_id)), spec.nodes, spec.num_tasks,
                       spec.strategy, time.time(), list(command) if command else None, sweep=job_id,
                       elements=[dict(values) for values in sweep.elements], pack=spec.pack and spec.pack.as_json())
    share = spec.share
    assert share is not None
    trials = [replace(element, tasks=share.nodes * share.tasks, nodes=share.nodes)
              for element in element_records(record)]
    write_while_held(slurm, spec, record, trials, code, "packed sweep")
    return record


def check_local_gpus(spec: JobRequest) -> None:
    """--local: more GPUs than this machine has, refused in one line before a snapshot or a run folder is stored
    (the launcher would refuse it too, once the job had started)."""
    from hpc_train.injob.mock_srun import Step, gpu_environments, machine_gpus

    group = spec.groups[0]  # (as the job body's mock step: every node as the first group's)
    gpu_environments(Step.make(spec.nodes, group.tasks_per_node, job_id=0, gpus_per_node=group.gpus_per_node,
                               strategy=spec.strategy, num_ps=spec.num_ps), machine_gpus(os.environ))


def run_locally(spec: JobRequest, train: TrainConfig, runs: Path = RUNS, command: Sequence[str] | None = None,
                code: JobCode | None = None) -> int:
    """The same job, run here by the same job body as a batch script's (its start line, its epilogue's verdict),
    its ranks started on this machine by the mock launcher (in the snapshot, `code`, as a batch script's)."""
    from hpc_train.injob.body import run_job
    from hpc_train.injob.supervisor import CommandJob, supervised_arguments
    from hpc_train.login.script import job_body

    config = job_config(spec, train)
    body = job_body(spec, config, command)
    job_id = f"local-{time.strftime('%Y%m%d-%H%M%S')}"
    folder = run_folder(runs, spec.name, job_id)
    record = JobRecord(job_id, spec.name, str(folder), spec.nodes, spec.num_tasks, spec.strategy, time.time(),
                       list(command) if command else None)
    folder = folder.absolute()  # (the ranks may start elsewhere: in the snapshot)
    _write_folder(record, replace(config, output_dir=str(folder)), code)
    if command:
        job = CommandJob(tuple(command), spec.strategy, spec.num_ps, config.max_requeues, spec.keras,
                         spec.command_signal)
        task_command = [sys.executable, "-m", "hpc_train", *supervised_arguments(job)]
    else:
        task_command = [sys.executable, "-m", "hpc_train.train", "--config", str(folder / "config.yaml")]
    # Here, even inside a Slurm allocation: without Slurm's variables the body starts the mock launcher, not srun.
    here = {name: value for name, value in os.environ.items() if not name.startswith("SLURM_")}
    with chdir(code.snapshot.workdir if code else Path.cwd()):
        return run_job(replace(body, run_dir=folder), task_command,
                       {**here, **(code.environment() if code else {})})


def provenance(code: JobCode | None) -> tuple[dict, str]:
    """The provenance of a job submitted now: its snapshot's, else git's word on this directory."""
    from hpc_train.runs.provenance import provenance as of

    return of(code.snapshot, code.submit_dir) if code else of(None, Path.cwd())


def _write_folder(record: JobRecord, config: TrainConfig, code: JobCode | None = None) -> None:
    from hpc_train.runs.secret import narrow_to_user

    record.write()
    narrow_to_user(Path(record.folder))  # submitit made it as any folder: the user's alone, as the job body's
    write_provenance(Path(record.folder), *provenance(code))
    # Written then renamed: the job may already run (submit writes after sbatch), and its ranks read this file.
    write_text_atomically(Path(record.folder) / "config.yaml", yaml.safe_dump(to_dict(config), sort_keys=False))
