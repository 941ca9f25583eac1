"""Submit a job's plan (login/plan.py): through submitit's Slurm executor, or its script through the Slurm client;
or run it here (`run_locally`: this process becomes the script's job line, whose body starts the mock launcher).

`executor_for` turns a plan into a submitit executor (nothing submitted) whose callable is the job body itself
(injob/entrypoints.py: `use_srun=False`, run once on the batch host), asking Slurm the plan's #SBATCH options;
`submit_plan` submits a job and writes its folder; `submit_sweep` and `submit_pack` submit the plan's script (the
one render and a dry run print) held, through the Slurm client, and write the folders before releasing it. Only
submitit's public API is used (SlurmExecutor, update_parameters, submit): its own sbatch call is the one Slurm
command not run by the Slurm client (docs/architecture.md).
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, NoReturn

import yaml

from hpc_train.config import TrainConfig, to_dict
from hpc_train.errors import HpcTrainError
from hpc_train.injob.entrypoints import JobCall
from hpc_train.login.plan import SUBMITIT, JobPlan
from hpc_train.login.script import activation_script, code_lines, job_body, job_config
from hpc_train.runs.folders import RUNS, JobRecord, element_records, run_folder
from hpc_train.runs.provenance import write_provenance
from hpc_train.runs.snapshot import JobCode
from hpc_train.runs.state import write_text_atomically
from hpc_train.spec.directives import directives
from hpc_train.spec.jobline import words
from hpc_train.spec.request import JobRequest, time_minutes


def make_executor(spec: JobRequest, train: TrainConfig, runs: Path = RUNS, home: str | None = None,
                  command: Sequence[str] | None = None, code: JobCode | None = None) -> Any:
    """A submitit SlurmExecutor for the request (see executor_for)."""
    return executor_for(JobPlan(spec, train, home=home, runs=runs, command=tuple(command) if command else None,
                                code=code))


def executor_for(plan: JobPlan) -> Any:
    """A submitit SlurmExecutor for a plan submitit can say (plan.submitter): folder runs/NAME-%j (its batch log
    there), the plan's #SBATCH options, and `use_srun=False`: what it submits (job_call) runs once, on the batch host.

    Its script's setup activates --home's environment (a checkout's env/activate.sh, with the site's modules, or a
    virtual environment; its python3 then runs the body and the ranks; None: this very Python) and enters the
    snapshot, `code`, every attempt runs in. Nothing submitted yet.
    """
    import submitit

    python = shlex.quote(sys.executable)
    setup: list[str] = []
    if plan.home is not None:
        setup = [f"source {shlex.quote(str(activation_script(plan.home)))}"]
        python = "python3"  # the activated environment's
    # `exec`: the batch shell becomes the job body, as in every script of hpc-train's, so that a signal to the
    # batch shell (`--signal=B:USR1@...`, `scancel --batch`) reaches the body, which passes it on to its step;
    # bash would die of it otherwise (submitit's command line is the script's last).
    executor = submitit.SlurmExecutor(folder=str(plan.runs / f"{plan.request.name}-%j"), python=f"exec {python}")
    asked = directives(plan.request)  # (submitit writes one group's #SBATCH lines: a heterogeneous job is not its)
    # The job's own log where every job's is (runs/joblog.py), stdout and stderr in one, over submitit's
    # JOBID_0_log.out and .err: the same folder, which submitit makes as it submits (its pickles stay there).
    asked["output"] = plan.job_log()
    asked.pop("open-mode")  # (submitit's own: append, a requeued job's log keeps every attempt's)
    if plan.request.hold:
        asked["hold"] = True
    # Every option as the plan's script asks it (submitit's own names, `_`, so that ours replace its: its signal
    # USR2 by the plan's USR1, which a user's command is told directly), but the time: in minutes, where None
    # leaves --time out (the partition's default applies, not submitit's 5 minutes).
    time = asked.pop("time", None)
    executor.update_parameters(
        time=time_minutes(str(time)) if time else None, use_srun=False, stderr_to_stdout=True,
        # The batch log holds the job body's lines, as every job's: submitit's own INFO lines left out.
        setup=[*setup, "export SUBMITIT_LOG_LEVEL=WARNING", *code_lines(plan.code)],
        additional_parameters={name.replace("-", "_"): value for name, value in asked.items()})
    return executor


def job_call(plan: JobPlan) -> JobCall:
    """What submitit runs: the plan's job body (injob/entrypoints.py)."""
    from hpc_train.injob.supervisor import CommandJob, supervised_arguments

    spec, config = plan.request, job_config(plan.request, plan.train)
    ranks = None
    if plan.command:
        ranks = tuple(supervised_arguments(CommandJob(plan.command, spec.strategy, spec.num_ps, config.max_requeues,
                                                      spec.keras, spec.command_signal)))
    return JobCall(spec.name, plan.runs.absolute(), job_body(spec, config, plan.command),
                   yaml.safe_dump(to_dict(config), sort_keys=False), ranks)


def sbatch_parameters(spec: JobRequest) -> dict[str, Any]:
    """--after/--dependency and --sbatch's options as submitit's additional parameters (it quotes each value; its
    own name for one, with `_`, so that ours replaces its: wckey)."""
    options = {name.replace("-", "_"): True if value is None else value for name, value in spec.sbatch}
    return {**options, **({"dependency": spec.dependency} if spec.dependency else {})}


def submit(spec: JobRequest, train: TrainConfig, runs: Path = RUNS, command: Sequence[str] | None = None,
           home: str | None = None, code: JobCode | None = None) -> JobRecord:
    """Submit; return the job's record, its folder holding the script and the settings.

    `command`: the user's own command for every rank (under the bootstrap) instead of the trainer;
    `home`: the environment the job activates; `code`: the snapshot it runs (see executor_for).
    """
    from hpc_train.login.preflight import check_request

    check_request(spec, os.environ)  # never submit what cannot run: a pending-for-ever job wastes a day
    return submit_plan(JobPlan(spec, train, home=home, runs=runs, command=tuple(command) if command else None,
                               code=code))


def submit_plan(plan: JobPlan) -> JobRecord:
    """Submit one job (not a sweep), checked already (login/preflight.py: submit checks before it stores anything):
    through submitit where it can say it, else its script through the client."""
    if shutil.which("sbatch") is None:
        raise HpcTrainError("no Slurm here (sbatch not found): add --local to run the job's tasks on this machine, "
                            "or start a local cluster with hpc-train cluster up")
    spec = plan.request
    if plan.submitter != SUBMITIT:
        return _submit_rendered(plan)
    executor = executor_for(plan)
    try:
        job = executor.submit(job_call(plan))
    except Exception as error:  # submitit wraps sbatch's own complaint
        message = str(error).strip().splitlines()
        raise HpcTrainError(f"sbatch refused the job: {message[-1] if message else error}") from None
    record = JobRecord(job.job_id, spec.name, str(run_folder(plan.runs, spec.name, job.job_id)), spec.nodes,
                       spec.num_tasks, spec.strategy, time.time(), list(plan.command) if plan.command else None)
    _write_folder(record, job_config(spec, plan.train), plan.code)
    return record


def _submit_rendered(plan: JobPlan) -> JobRecord:
    """A job submitit cannot say (a heterogeneous one: submitit writes one group's #SBATCH lines): the plan's script,
    the one render and a dry run print, to sbatch through the Slurm client; the id is the (het) leader's."""
    from hpc_train.slurm.client import SlurmClient

    spec = plan.request
    job_id = SlurmClient.local(os.environ).submit_text(plan.script(), cwd=os.getcwd())
    record = JobRecord(job_id, spec.name, str(run_folder(plan.runs, spec.name, job_id)), spec.nodes, spec.num_tasks,
                       spec.strategy, time.time(), list(plan.command) if plan.command else None,
                       components=components(spec) if spec.components > 1 else None)
    _write_folder(record, job_config(spec, plan.train), plan.code)
    return record


def components(spec: JobRequest) -> list[dict]:
    """What a job record keeps of each group (and of the data service's own component, the last): what status
    shows per component (the service's nodes are Slurm's choice: None, shown as ?)."""
    service = spec.data_service
    own = [{"partition": service.partition, "nodes": None, "tasks": service.processes, "gpus_per_node": 0,
            "roles": ["data service"]}] if service is not None and service.component else []
    return [{"partition": group.partition, "nodes": group.nodes, "tasks": group.num_tasks,
             "gpus_per_node": group.gpus_per_node,  # (multiworker: every rank a worker, docs/bootstrap.md)
             "roles": list(group.roles) if spec.strategy == "parameter_server" else ["worker"]}
            for group in spec.groups] + own


def default_home_text() -> str:
    """What a rendered script activates when no --home is given: this Python's environment."""
    return sys.prefix


def submit_sweep(plan: JobPlan) -> JobRecord:
    """Submit a sweep as one job array (one sbatch of the plan's script); its record, and one per element
    (runs/NAME-ARRAYID_I/).

    The array is submitted held and released once every element's folder is there: Slurm opens an element's
    batch log, in that folder (plan.batch_log), before its script runs. (--hold: it stays held, for the user's
    scontrol release.) Every element runs the one snapshot, the plan's code."""
    if shutil.which("sbatch") is None:
        raise HpcTrainError("no Slurm here (sbatch not found): a sweep runs as a job array; start a local cluster "
                            "with hpc-train cluster up")
    spec, sweep = plan.request, plan.sweep
    assert sweep is not None
    text = plan.script()
    array_id, slurm = _submit_held(plan, text, "sweep")
    record = JobRecord(array_id, spec.name, str(run_folder(plan.runs, spec.name, array_id)), spec.nodes,
                       spec.num_tasks, spec.strategy, time.time(), list(plan.command) if plan.command else None,
                       sweep=array_id, elements=[dict(values) for values in sweep.elements])
    write_while_held(slurm, spec, record, element_records(record), plan.code, "sweep", text)
    return record


def _submit_held(plan: JobPlan, text: str, what: str) -> tuple[str, Any]:
    """The plan's script (checked already, login/preflight.py), submitted held (plan.sbatch_options) through the
    Slurm client from a file in the runs folder; its id and the client."""
    from hpc_train.slurm.client import SlurmClient

    plan.runs.mkdir(parents=True, exist_ok=True)
    script = plan.runs / f".{plan.request.name}-{what}-{os.getpid()}.sbatch"
    script.write_text(text)
    slurm = SlurmClient.local(os.environ)
    try:
        return slurm.submit_script(str(script), options=plan.sbatch_options()), slurm
    finally:
        script.unlink()


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


def submit_pack(plan: JobPlan) -> JobRecord:
    """Submit a packed sweep: ONE job (one sbatch) whose body runs the trials as steps (injob/pack); its record,
    and one per trial (runs/NAME-JOBID_I/), written while the job is held, its batch log in its own folder."""
    if shutil.which("sbatch") is None:
        raise HpcTrainError("no Slurm here (sbatch not found): a packed sweep runs as one Slurm job; start a local "
                            "cluster with hpc-train cluster up")
    spec, sweep = plan.request, plan.sweep
    assert sweep is not None
    job_id, slurm = _submit_held(plan, plan.script(), "pack")
    record = JobRecord(job_id, spec.name, str(run_folder(plan.runs, spec.name, job_id)), spec.nodes, spec.num_tasks,
                       spec.strategy, time.time(), list(plan.command) if plan.command else None, sweep=job_id,
                       elements=[dict(values) for values in sweep.elements], pack=spec.pack and spec.pack.as_json())
    share = spec.share
    assert share is not None
    trials = [replace(element, tasks=share.nodes * share.tasks, nodes=share.nodes)
              for element in element_records(record)]
    write_while_held(slurm, spec, record, trials, plan.code, "packed sweep")
    return record


@contextmanager
def chdir(folder: Path) -> Iterator[None]:
    """contextlib.chdir is Python 3.11+; this project promises 3.10."""
    before = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


def run_locally(plan: JobPlan) -> NoReturn:
    """The same job, run here by the same job body as a batch script's: this process becomes the script's last line,
    `hpc-train job ...` (its start line, its epilogue's verdict, its exit code the job's), the ranks started on this
    machine by the mock launcher (in the snapshot, `code`, as a batch script's)."""
    from hpc_train.injob.supervisor import CommandJob, supervised_arguments

    spec, command, code = plan.request, plan.command, plan.code
    config = job_config(spec, plan.train)
    job_id = f"local-{time.strftime('%Y%m%d-%H%M%S')}"
    folder = run_folder(plan.runs, spec.name, job_id)
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
    line = [sys.executable, "-m", "hpc_train", "job", "--run-dir", str(folder),
            *words(job_body(spec, config, command)), "--", *task_command]
    # Here, even inside a Slurm allocation: without Slurm's variables the body starts the mock launcher, not srun.
    here = {name: value for name, value in os.environ.items() if not name.startswith("SLURM_")}
    os.chdir(code.snapshot.workdir if code else Path.cwd())
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, line, {**here, **(code.environment() if code else {})})


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
