"""`submit --remote a,b` (or `--remote all`): ask each cluster when it would start this very request, submit to
the earliest.

Each login node is asked `sbatch --test-only` with the request's own options, over the shared connection
(remote/sshslurm.py), all of them at once, each within a bound; one that fails or stays silent is skipped with its
reason. What the answers mean, which one wins and the line that says so are pure (`parse_start`, `choose`,
`summary`). Slurm prints a start in its controller's local time: clusters in different time zones compare as
their clocks read.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from hpc_train.errors import HpcTrainError
from hpc_train.remote.config import Remote, load

ALL = "all"
# sbatch: Job 1234 to start at 2026-11-26T04:00:00 using 2 processors on nodes node[1-2] in partition debug
# What sbatch says when its controller is down or frozen (slurm_strerror's words), not of the request.
_OUTAGE = re.compile(r"unable to contact slurm controller|socket timed out|zero bytes were transmitted|"
                     r"connection refused|slurmctld.*(not responding|down)", re.IGNORECASE)
_START = re.compile(r"to start at (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:.* in partition (\S+))?")


@dataclass(frozen=True)
class Estimate:
    """One cluster's answer: when it would start the job (and in which partition), or why it is skipped."""

    remote: str
    start: datetime | None = None
    partition: str = ""
    skipped: str = ""  # why there is no start: its reason, in words
    silent: bool = False  # it did not answer within the bound


def names(given: str, environ: Mapping[str, str]) -> list[str]:
    """The remotes `--remote` names: one, several (`a,b`: in that order), or `all` (every remote configured);
    an unknown one, an empty name or none configured is one line."""
    known = load(environ)
    wanted = sorted(known) if given == ALL else given.split(",")
    if not wanted:
        raise HpcTrainError("--remote all: no remotes yet; add one: hpc-train remote add NAME --host HOST "
                            "--workdir DIR")
    for name in wanted:
        if name not in known:
            listed = ", ".join(sorted(known)) or "none yet"
            what = f"unknown remote {name!r}" if name else f"--remote {given!r}: an empty name"
            raise HpcTrainError(f"{what} (known: {listed}); name remotes separated by commas (or all), or add it: "
                                f"hpc-train remote add {name or 'NAME'} --host HOST --workdir DIR")
    return list(dict.fromkeys(wanted))


def parse_start(remote: str, code: int, said: str) -> Estimate:
    """What `sbatch --test-only` answered (its exit code and stderr) as an estimate (pure)."""
    found = _START.search(said)
    if code == 0 and found:
        return Estimate(remote, datetime.fromisoformat(found.group(1)), found.group(2) or "")
    lines = [line.strip() for line in said.splitlines() if line.strip()]
    reason = re.sub(r"^(sbatch: error: |allocation failure: )", "", lines[-1]) if lines else f"exit code {code}"
    if code and _OUTAGE.search(said):  # Slurm down or frozen there: not a request it rejects
        return Estimate(remote, skipped=f"Slurm is not answering there ({reason}); try it again later or check it: "
                                        f"hpc-train remote check {remote}")
    return Estimate(remote, skipped=f"Slurm would not run it there ({reason})" if code else
                    f"sbatch --test-only gave no start ({reason})")


def choose(estimates: Sequence[Estimate]) -> Estimate | None:
    """The earliest start; a tie goes to the first named; None when no cluster gave one (pure)."""
    started = [estimate for estimate in estimates if estimate.start is not None]
    return min(started, key=lambda estimate: estimate.start) if started else None  # min keeps the first of a tie


def summary(estimates: Sequence[Estimate], chosen: Estimate | None, seconds: int) -> str:
    """The one stderr line: every cluster's estimate, in the order named (pure)."""
    words = []
    for estimate in estimates:
        if estimate.start is not None:
            mark = " (chosen)" if estimate is chosen else ""
            words.append(f"{estimate.remote} {estimate.start.isoformat(timespec='minutes')}{mark}")
        else:
            words.append(f"{estimate.remote} did not answer in {seconds} s" if estimate.silent else
                         f"{estimate.remote} skipped")
    return "hpc-train: earliest start: " + ", ".join(words)


def skipped_line(estimate: Estimate, seconds: int) -> str:
    """The line that says why a cluster is skipped (pure)."""
    reason = f"did not answer within {seconds} s" if estimate.silent else estimate.skipped
    return f"hpc-train submit: remote {estimate.remote} skipped: {reason}"


def nothing_line(estimates: Sequence[Estimate], seconds: int) -> str:
    """The one line when no cluster can start it: nothing is queued (pure)."""
    reasons = "; ".join(skipped_line(estimate, seconds).split("remote ", 1)[1] for estimate in estimates)
    return f"no remote gave a start for this request, nothing queued: {reasons}"


def estimate_all(remotes: Sequence[Remote], options: Sequence[str], environ: Mapping[str, str],
                 seconds: int, verb: str = "submit") -> list[Estimate]:
    """Ask every remote at once; each that has not answered `seconds` after the start is skipped as silent (its
    thread is left to end on its own bounds: ssh's connect timeout, and `timeout` around sbatch there); one whose
    hpc-train cannot serve `verb` (its protocol) is skipped with that reason."""
    answers: dict[str, Estimate] = {}
    threads = [threading.Thread(target=_ask_one, args=(remote, options, environ, seconds, verb, answers), daemon=True)
               for remote in remotes]
    deadline = time.monotonic() + seconds
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return [answers.get(remote.name) or Estimate(remote.name, skipped="silent", silent=True) for remote in remotes]


def _ask_one(remote: Remote, options: Sequence[str], environ: Mapping[str, str], seconds: int, verb: str,
             answers: dict[str, Estimate]) -> None:
    from hpc_train.remote.run import connect
    from hpc_train.remote.sshslurm import slurm_there
    from hpc_train.slurm.transport import TIMED_OUT

    try:
        connect(remote, environ, verb)
        result = slurm_there(remote, environ).test_only(options, timeout=seconds)
    except (HpcTrainError, OSError) as error:  # (OSError: the control folder here, say; never a traceback)
        answers[remote.name] = Estimate(remote.name, skipped=str(error))
        return
    if result.returncode == TIMED_OUT:
        answers[remote.name] = Estimate(remote.name, skipped="silent", silent=True)
        return
    answers[remote.name] = parse_start(remote.name, result.returncode, result.stderr + result.stdout)
