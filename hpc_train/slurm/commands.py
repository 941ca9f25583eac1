"""The one module that runs Slurm's commands (sbatch, srun, scontrol, squeue, sacct, scancel, sinfo, sacctmgr).

Everything else in hpc-train asks Slurm through the functions here, so that
every call has a timeout, none raises a traceback when Slurm is missing or does
not answer, and a test can see in one place what hpc-train asks of Slurm. A
command that is missing here or does not answer is a failed run whose stderr
says why (`run`); the functions above it turn that into what their callers need.

Pure parsers of Slurm's output live beside their users (follow.py,
partitions.py); this module only runs commands and splits `key=value` text.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence

from hpc_train.errors import HpcTrainError

# A run's exit code when the command did not answer within its timeout, or could not be started (as the shell's).
TIMED_OUT, NOT_FOUND = 124, 127
COMMANDS = ("sbatch", "srun", "scontrol", "squeue", "sacct", "scancel", "sinfo", "sacctmgr")
# sacct's fields for a job's runs, in this order (follow.parse_sacct reads them).
SACCT_FIELDS = ("JobID", "State", "ExitCode", "Elapsed", "NodeList")


def run(command: Sequence[str], env: Mapping[str, str] | None = None, timeout: float = 30,
        stdin: str | None = None, cwd: str | os.PathLike[str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run one of Slurm's commands; one that is missing here or does not answer is a failed run (said in its
    stderr), not an exception."""
    try:
        return subprocess.run(list(command), env=None if env is None else dict(env), input=stdin,
                              capture_output=True, text=True, timeout=timeout, cwd=cwd)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(list(command), TIMED_OUT, "", f"{command[0]} did not answer within "
                                                                          f"{timeout:.0f} s")
    except OSError as error:
        return subprocess.CompletedProcess(list(command), NOT_FOUND, "", f"cannot run {command[0]}: "
                                                                          f"{error.strerror or error}")


def available(*commands: str) -> bool:
    """Whether every one of these commands is on PATH here."""
    return all(shutil.which(command) is not None for command in commands)


def last_words(result: subprocess.CompletedProcess[str], default: str = "no answer") -> str:
    """The last line a failed command said (its reason), for a one-line error."""
    lines = [line.strip() for line in (result.stderr + "\n" + result.stdout).splitlines() if line.strip()]
    return lines[-1] if lines else default


def fields(line: str) -> dict[str, str]:
    """`scontrol show ... -o` output (one record per line) as a dict: Key=Value words."""
    return dict(part.split("=", 1) for part in line.split() if "=" in part)


def show_job(job_id: str, env: Mapping[str, str]) -> dict[str, str]:
    """`scontrol show job` as a dict (JobState, ExitCode, StdOut, NodeList, ...); empty once Slurm forgot it."""
    return fields(run(["scontrol", "show", "job", "-o", job_id], env).stdout)


def config_value(name: str, env: Mapping[str, str], timeout: float = 10) -> str | None:
    """One value of the controller's configuration (`scontrol show config`: MaxArraySize, ...), None if unknown."""
    for line in run(["scontrol", "show", "config"], env, timeout=timeout).stdout.splitlines():
        key, equals, value = line.partition("=")
        if equals and key.strip() == name:
            return value.strip()
    return None


def show(kind: str, env: Mapping[str, str], timeout: float = 20) -> subprocess.CompletedProcess[str]:
    """`scontrol show KIND -o` (partition, node, ...): one record per line."""
    return run(["scontrol", "show", kind, "-o"], env, timeout=timeout)


def queued_states(job_ids: Iterable[str], env: Mapping[str, str]) -> dict[str, str]:
    """Job id -> state (PENDING, RUNNING, COMPLETED, ...) of the given jobs the controller still holds (for
    MinJobAge after their end, as `scontrol show job`): one squeue call."""
    wanted = list(job_ids)
    if not wanted:
        return {}
    result = run(["squeue", "-h", "-t", "all", "-j", ",".join(wanted), "-o", "%i %T"], env)
    states = dict(line.split(None, 1) for line in result.stdout.splitlines() if len(line.split()) == 2)
    return {job: state.strip() for job, state in states.items() if job in wanted}


def array_states(array_id: str, env: Mapping[str, str]) -> str:
    """`squeue -t all -j ARRAYID -o '%i %T'`: a job array's elements as Slurm still holds them (pending ones
    folded into one line, "12_[2-3%2] PENDING"); parsed by follow.parse_array_states."""
    return run(["squeue", "-h", "-t", "all", "-j", array_id, "-o", "%i %T"], env).stdout


def accounting(job_ids: Iterable[str], env: Mapping[str, str]) -> str | None:
    """sacct's rows for the given jobs, every run of each (-D), oldest first: one call.

    None where Slurm keeps no accounting (sacct fails); the fields are SACCT_FIELDS, '|'-separated.
    """
    wanted = list(job_ids)
    if not wanted:
        return ""
    result = run(["sacct", "-j", ",".join(wanted), "-X", "-D", "-n", "-P", "-o", ",".join(SACCT_FIELDS)], env)
    return result.stdout if result.returncode == 0 else None


def submit_script(script: str, env: Mapping[str, str], arguments: Sequence[str] = (),
                  cwd: str | os.PathLike[str] | None = None) -> str:
    """`sbatch --parsable SCRIPT ARGS`: the job id; HpcTrainError with sbatch's reason when it refuses."""
    result = run(["sbatch", "--parsable", script, *arguments], env, timeout=120, cwd=cwd)
    if result.returncode != 0:
        raise HpcTrainError(f"sbatch {script} failed: {last_words(result)}")
    return result.stdout.strip().split(";")[0]


def test_only(options: Sequence[str], env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    """`sbatch --test-only OPTIONS --wrap=true`: whether the scheduler would run such a job."""
    return run(["sbatch", "--test-only", *options, "--wrap=true"], env, timeout=60)


def requeue(job_id: str, env: Mapping[str, str] | None = None, timeout: float = 60.0) -> str | None:
    """Ask Slurm to requeue the job; None when it agreed, else its complaint."""
    if not available("scontrol"):
        return "scontrol not found"
    result = run(["scontrol", "requeue", job_id], env, timeout=timeout)
    return None if result.returncode == 0 else last_words(result, f"exit code {result.returncode}")


def cancel(job_ids: Sequence[str], env: Mapping[str, str] | None = None) -> str | None:
    """scancel the jobs; None when Slurm took it, else its complaint."""
    if not job_ids:
        return None
    result = run(["scancel", *job_ids], env)
    return None if result.returncode == 0 else last_words(result, "no reason given")


def update_node(name: str, env: Mapping[str, str], **settings: str) -> subprocess.CompletedProcess[str]:
    """`scontrol update NodeName=NAME Key=Value ...` (State=RESUME, State=DOWN Reason=...)."""
    return run(["scontrol", "update", f"NodeName={name}", *(f"{key}={value}" for key, value in settings.items())],
               env)


def update_job(job_id: str, env: Mapping[str, str], **settings: str) -> subprocess.CompletedProcess[str]:
    """`scontrol update JobId=J Key=Value ...` (ExcNodeList=..., refused by Slurm while the job runs)."""
    return run(["scontrol", "update", f"JobId={job_id}", *(f"{key}={value}" for key, value in settings.items())],
               env)


def node_states(env: Mapping[str, str], partition: str | None = None) -> dict[str, str]:
    """Node name -> its state as sinfo gives it (idle, alloc, down*, drain, ...), of one partition if named."""
    result = run(["sinfo", "-h", "-N", *(("-p", partition) if partition else ()), "-o", "%N %t"], env)
    return dict(line.split(None, 1) for line in result.stdout.splitlines() if len(line.split()) == 2)


def srun(arguments: Sequence[str], env: Mapping[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    """`srun ARGS`, its output captured; a step that outlives `timeout` is a failed run."""
    return run(["srun", *arguments], env, timeout=timeout)


def start_step(arguments: Sequence[str], env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    """`srun ARGS` started, not waited for, its output the caller's: a job's step, which the job body waits for
    and passes signals on to (hpc_train/injob/body.py)."""
    return subprocess.Popen(["srun", *arguments], env=dict(env))


def sacctmgr(arguments: Sequence[str], env: Mapping[str, str], timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """`sacctmgr ARGS` (the local cluster registers itself with accounting)."""
    return run(["sacctmgr", *arguments], env, timeout=timeout)
