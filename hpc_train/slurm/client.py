"""The Slurm client: the one place that runs Slurm's commands (sbatch, srun, scontrol, squeue, sacct, scancel,
sinfo, sacctmgr).

Everything else in hpc-train asks Slurm through a `SlurmClient`, so that every
call has a timeout, none raises a traceback when Slurm is missing or does not
answer, and a test can see in one place what hpc-train asks of Slurm. A
command that is missing or does not answer is a failed run whose stderr says
why (`run`); the methods above it turn that into what their callers need.

The client only builds argv and reads answers: its transport runs them (here,
or on a login node), so it never looks at this machine's files or PATH itself.
Pure parsers of Slurm's output live beside their users (follow.py,
partitions.py); this module only splits `key=value` text.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from hpc_train.errors import HpcTrainError
from hpc_train.slurm.transport import NOT_FOUND, TIMED_OUT, LocalTransport, Transport

__all__ = ["COMMANDS", "NOT_FOUND", "SACCT_FIELDS", "TIMED_OUT", "SlurmClient", "fields", "last_words"]

COMMANDS = ("sbatch", "srun", "scontrol", "squeue", "sacct", "scancel", "sinfo", "sacctmgr")
# sacct's fields for a job's runs, in this order (follow.parse_sacct reads them).
SACCT_FIELDS = ("JobID", "State", "ExitCode", "Elapsed", "NodeList", "Partition")


def last_words(result: subprocess.CompletedProcess[str], default: str = "no answer") -> str:
    """The last line a failed command said (its reason), for a one-line error."""
    lines = [line.strip() for line in (result.stderr + "\n" + result.stdout).splitlines() if line.strip()]
    return lines[-1] if lines else default


def fields(line: str) -> dict[str, str]:
    """`scontrol show ... -o` output (one record per line) as a dict: Key=Value words."""
    return dict(part.split("=", 1) for part in line.split() if "=" in part)


def settings_words(settings: Mapping[str, str]) -> list[str]:
    """`Key=Value` words for `scontrol update` (pure)."""
    return [f"{key}={value}" for key, value in settings.items()]


@dataclass(frozen=True)
class SlurmClient:
    """Slurm's commands as methods, run through `transport` with `env` (None: the transport's own environment)."""

    env: Mapping[str, str] | None = None
    transport: Transport = field(default_factory=LocalTransport)

    @classmethod
    def local(cls, environ: Mapping[str, str] | None = None) -> SlurmClient:
        """A client running Slurm's commands here, with a copy of `environ` (None: this process's, as it is
        when each command runs)."""
        return cls(None if environ is None else dict(environ), LocalTransport())

    def run(self, argv: Sequence[str], timeout: float = 30, stdin: str | None = None,
            cwd: str | os.PathLike[str] | None = None) -> subprocess.CompletedProcess[str]:
        """Run one of Slurm's commands; one that is missing or does not answer is a failed run (said in its
        stderr), not an exception."""
        return self.transport.run(list(argv), self.env, timeout, stdin, cwd)

    def variable(self, name: str) -> str | None:
        """A variable of the environment Slurm's commands run with (SLURM_CONF, ...), None if unset."""
        return (os.environ if self.env is None else self.env).get(name)

    def available(self, *commands: str) -> bool:
        """Whether every one of these commands is there to run."""
        return all(self.transport.has(command, self.env) for command in commands)

    # scontrol

    def show_job(self, job_id: str, timeout: float = 30) -> dict[str, str]:
        """`scontrol show job` as a dict (JobState, ExitCode, StdOut, NodeList, Restarts, ...); empty once Slurm
        forgot it (or did not answer in `timeout` seconds)."""
        return fields(self.run(["scontrol", "show", "job", "-o", job_id], timeout=timeout).stdout)

    def show_job_components(self, job_id: str, timeout: float = 30) -> list[dict[str, str]]:
        """`scontrol show job` of a heterogeneous job: a dict per component (one line each), in order; a plain
        job's one; none once Slurm forgot it (or did not answer in `timeout` seconds)."""
        lines = self.run(["scontrol", "show", "job", "-o", job_id], timeout=timeout).stdout.splitlines()
        return [fields(line) for line in lines if line.strip()]

    def config_value(self, name: str, timeout: float = 10) -> str | None:
        """One value of the controller's configuration (`scontrol show config`: MaxArraySize, ...), None if
        unknown."""
        for line in self.run(["scontrol", "show", "config"], timeout=timeout).stdout.splitlines():
            key, equals, value = line.partition("=")
            if equals and key.strip() == name:
                return value.strip()
        return None

    def show(self, kind: str, timeout: float = 20) -> subprocess.CompletedProcess[str]:
        """`scontrol show KIND -o` (partition, node, ...): one record per line."""
        return self.run(["scontrol", "show", kind, "-o"], timeout=timeout)

    def requeue(self, job_id: str, timeout: float = 60.0) -> str | None:
        """Ask Slurm to requeue the job; None when it agreed, else its complaint."""
        if not self.available("scontrol"):
            return "scontrol not found"
        result = self.run(["scontrol", "requeue", job_id], timeout=timeout)
        return None if result.returncode == 0 else last_words(result, f"exit code {result.returncode}")

    def release(self, job_id: str, timeout: float = 60.0) -> str | None:
        """`scontrol release JOBID` (a held job, or every element of a held array); None, else Slurm's complaint."""
        result = self.run(["scontrol", "release", job_id], timeout=timeout)
        return None if result.returncode == 0 else last_words(result, f"exit code {result.returncode}")

    def update_node(self, name: str, **settings: str) -> subprocess.CompletedProcess[str]:
        """`scontrol update NodeName=NAME Key=Value ...` (State=RESUME, State=DOWN Reason=...)."""
        return self.run(["scontrol", "update", f"NodeName={name}", *settings_words(settings)])

    def update_job(self, job_id: str, **settings: str) -> subprocess.CompletedProcess[str]:
        """`scontrol update JobId=J Key=Value ...` (ExcNodeList=..., refused by Slurm while the job runs)."""
        return self.run(["scontrol", "update", f"JobId={job_id}", *settings_words(settings)])

    def resize_job(self, job_id: str, nodes: str, cwd: str | os.PathLike[str], timeout: float = 60.0) -> str | None:
        """`scontrol update JobId=J NodeList=NODES` on a running job: it gives back every node not named (never its
        batch host: "Invalid node name specified"); Slurm writes slurm_job_J_resize.sh in `cwd`, the variables its
        batch script now has wrong. None when Slurm took it, else its complaint."""
        result = self.run(["scontrol", "update", f"JobId={job_id}", f"NodeList={nodes}"], timeout=timeout, cwd=cwd)
        return None if result.returncode == 0 else last_words(result, f"exit code {result.returncode}")

    # squeue

    def queued_states(self, job_ids: Iterable[str]) -> dict[str, str]:
        """Job id -> state (PENDING, RUNNING, COMPLETED, ...) of the given jobs the controller still holds (for
        MinJobAge after their end, as `scontrol show job`): one squeue call."""
        wanted = list(job_ids)
        if not wanted:
            return {}
        result = self.run(["squeue", "-h", "-t", "all", "-j", ",".join(wanted), "-o", "%i %T"])
        states = dict(line.split(None, 1) for line in result.stdout.splitlines() if len(line.split()) == 2)
        return {job: state.strip() for job, state in states.items() if job in wanted}

    def array_states(self, array_id: str) -> str:
        """`squeue -t all -j ARRAYID -o '%i %T'`: a job array's elements as Slurm still holds them (pending ones
        folded into one line, "12_[2-3%2] PENDING"); parsed by follow.parse_array_states."""
        return self.run(["squeue", "-h", "-t", "all", "-j", array_id, "-o", "%i %T"]).stdout

    def queue_state(self, job_id: str) -> str:
        """The job's state while it is in the queue (`squeue -j J -o %T`, PENDING, RUNNING, COMPLETING, ...);
        "" once it left the queue (or Slurm does not answer)."""
        return self.run(["squeue", "-h", "-j", job_id, "-o", "%T"]).stdout.strip()

    def jobs_on_node(self, node: str, timeout: float = 30) -> list[str] | None:
        """The ids of the jobs Slurm holds on `node` (`squeue -w NODE -o %A`: running, completing, ...); None
        when Slurm does not answer (nothing can then be said to have left)."""
        result = self.run(["squeue", "-h", "-w", node, "-o", "%A"], timeout=timeout)
        return result.stdout.split() if result.returncode == 0 else None

    def running_steps(self, job_id: str, timeout: float = 30) -> dict[str, str] | None:
        """Step name -> step id of the job's steps running now (`squeue --steps`); None when Slurm does not answer."""
        result = self.run(["squeue", "-h", "-s", "-j", job_id, "-o", "%i %j"], timeout=timeout)
        if result.returncode != 0:
            return None
        return {words[1]: words[0] for line in result.stdout.splitlines() if len(words := line.split()) == 2}

    def queued_job_ids(self) -> list[str]:
        """The ids of every job in the queue (`squeue -o %i`); none when Slurm does not answer."""
        return self.run(["squeue", "-h", "-o", "%i"]).stdout.split()

    # sacct

    def accounting(self, job_ids: Iterable[str]) -> str | None:
        """sacct's rows for the given jobs, every run of each (-D), oldest first: one call.

        None where Slurm keeps no accounting (sacct fails); the fields are SACCT_FIELDS, '|'-separated.
        """
        wanted = list(job_ids)
        if not wanted:
            return ""
        result = self.run(["sacct", "-j", ",".join(wanted), "-X", "-D", "-n", "-P", "-o", ",".join(SACCT_FIELDS)])
        return result.stdout if result.returncode == 0 else None

    def recent_accounting(self, timeout: float = 20) -> subprocess.CompletedProcess[str]:
        """`sacct` of the last hour's jobs: whether Slurm keeps accounting here (a failed run says why not)."""
        return self.run(["sacct", "-n", "-X", "-o", "JobID", "-S", "now-1hours"], timeout=timeout)

    # sbatch

    def submit_script(self, script: str, arguments: Sequence[str] = (),
                      cwd: str | os.PathLike[str] | None = None, options: Sequence[str] = ()) -> str:
        """`sbatch --parsable OPTIONS SCRIPT ARGS` (SCRIPT a path where Slurm runs): the job id; HpcTrainError with
        sbatch's reason when it refuses."""
        result = self.run(["sbatch", "--parsable", *options, script, *arguments], timeout=120, cwd=cwd)
        if result.returncode != 0:
            raise HpcTrainError(f"sbatch {script} failed: {last_words(result)}")
        return job_id_of(result)

    def submit_text(self, script: str, cwd: str | os.PathLike[str] | None = None) -> str:
        """`sbatch --parsable` given the script's text on stdin (no file needed where Slurm runs): the job id;
        HpcTrainError with sbatch's reason when it refuses."""
        result = self.run(["sbatch", "--parsable"], timeout=120, stdin=script, cwd=cwd)
        if result.returncode != 0:
            raise HpcTrainError(f"sbatch failed: {last_words(result)}")
        return job_id_of(result)

    def test_only(self, options: Sequence[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """`sbatch --test-only OPTIONS --wrap=true`: whether the scheduler would run such a job, and when (its
        stderr: "sbatch: Job 1234 to start at 2026-11-26T04:00:00 using ... in partition debug")."""
        return self.run(["sbatch", "--test-only", *options, "--wrap=true"], timeout=timeout)

    # scancel, sinfo, srun, sacctmgr

    def cancel(self, job_ids: Sequence[str]) -> str | None:
        """scancel the jobs; None when Slurm took it, else its complaint."""
        if not job_ids:
            return None
        result = self.run(["scancel", *job_ids])
        return None if result.returncode == 0 else last_words(result, "no reason given")

    def node_states(self, partition: str | None = None) -> dict[str, str]:
        """Node name -> its state as sinfo gives it (idle, alloc, down*, drain, ...), of one partition if named."""
        result = self.run(["sinfo", "-h", "-N", *(("-p", partition) if partition else ()), "-o", "%N %t"])
        return dict(line.split(None, 1) for line in result.stdout.splitlines() if len(line.split()) == 2)

    def answers(self) -> bool:
        """Whether a controller answers (`sinfo`)."""
        return self.run(["sinfo", "-h"]).returncode == 0

    def start_step(self, arguments: Sequence[str]) -> subprocess.Popen[bytes]:
        """`srun ARGS` started, not waited for, its output the caller's: a job's step, which the job body waits
        for and passes signals on to (hpc_train/injob/body.py)."""
        return self.transport.start(["srun", *arguments], self.env)

    def stream_step(self, arguments: Sequence[str]) -> subprocess.Popen[bytes]:
        """`srun ARGS` started, its stdout and stderr together in the process's stdout, read as they come (the
        doctor's step, which says where it listens while it runs)."""
        return self.transport.start(["srun", *arguments], self.env, piped=True)

    def srun(self, arguments: Sequence[str], timeout: float) -> subprocess.CompletedProcess[str]:
        """`srun ARGS`, its output captured; a step that outlives `timeout` is a failed run."""
        return self.run(["srun", *arguments], timeout=timeout)

    def sacctmgr(self, arguments: Sequence[str], timeout: float = 30) -> subprocess.CompletedProcess[str]:
        """`sacctmgr ARGS` (the local cluster registers itself with accounting)."""
        return self.run(["sacctmgr", *arguments], timeout=timeout)


def job_id_of(result: subprocess.CompletedProcess[str]) -> str:
    """The job id `sbatch --parsable` printed ("42" or "42;cluster")."""
    return result.stdout.strip().split(";")[0]
