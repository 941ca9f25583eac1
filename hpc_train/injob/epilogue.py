"""What a job's batch script does once its step has ended with a failure: retry it on healthy nodes, or decide
the job's exit code.

Written once, here, and run by hpc-train's job body (hpc_train/injob/body.py,
the `hpc-train job` every batch script hpc-train makes or ships runs) in its
own process, only when the step failed (a step that succeeded needs no
decision); scripts written before the body call it as `hpc-train epilogue
STEP_EXIT_CODE RUN_DIR STRATEGY [options]`. Its 0 turns the job into a success
(or leaves it requeued); otherwise the step's code stands, as it does when the
epilogue itself fails. It decides:

- a parameter-server step whose chief finished training on the workers left
  (state.json says "finished") did its work: the job ends as completed, with a
  warning naming the step's failure;
- a step that stopped to go on later (75, 42), or was stopped and requeued
  for the time limit, is not this module's: its code stands;
- otherwise, why the step failed (failures.py) and whether to retry
  (retry.py): a retried job is requeued with the nodes to blame excluded, and
  resumes from its last checkpoint; each failure goes into state.json's
  `attempts` and the log, one line. A node range's retry goes on inside its
  allocation instead, the nodes to blame given back to Slurm (shrink.py), when
  the body that called it can run the next attempt (`go_on`).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

from hpc_train.config import DEFAULT_MAX_RETRIES
from hpc_train.exitcodes import EXIT_STOPPED, EXIT_TF_PREEMPTION
from hpc_train.injob import shrink
from hpc_train.injob.failures import Failure, diagnose
from hpc_train.injob.servicecomponent import component_of
from hpc_train.injob.retry import (RetryPlan, component_exclusions, expand_nodes, given_back, plan_retry,
                                   requeue_excluding, usable_and_lost)
from hpc_train.runs import attempts
from hpc_train.runs.requeue import restart_count
from hpc_train.runs.state import read_state
from hpc_train.slurm.client import SlurmClient
from hpc_train.slurm.noderange import attempt_nodes, nodes_needed
from hpc_train.version import PREFIX

# How much of the end of the job log is read for srun's lines on this attempt's tasks.
LOG_TAIL_BYTES = 512 * 1024


def job_exit_code(step_code: int, strategy: str, run_state: dict) -> tuple[int, str | None]:
    """The job's exit code after its step, and a warning to print, if any (pure)."""
    if step_code != 0 and strategy == "parameter_server" and run_state.get("state") == "finished":
        return 0, (f"a task of the step failed (exit {step_code}), but the chief finished training on the workers "
                   "left and saved everything: the job ends as completed")
    return step_code, None


def not_for_retrying(step_code: int, run_state: dict) -> bool:
    """A step that stopped to go on later, that the chief stopped and requeued itself, or whose run had finished
    (a retry would find nothing to train): not a failure to retry."""
    return (step_code in (EXIT_STOPPED, EXIT_TF_PREEMPTION)
            or run_state.get("state") in ("stopped", "requeued", "finished"))


def attempt_log(text: str, job_id: str) -> str:
    """This attempt's part of a job log that keeps every attempt (appended): after its last start line."""
    starts = [match.start() for match in re.finditer(rf"^{PREFIX}: job {re.escape(job_id)}\b", text, re.M)]
    return text[starts[-1]:] if starts else text


class QuietParser(argparse.ArgumentParser):
    """A parser that raises ValueError on bad arguments (the caller prints one usage line), never exits itself."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise ValueError(message)


def _parser() -> argparse.ArgumentParser:
    parser = QuietParser(prog="hpc-train epilogue", add_help=False)
    parser.add_argument("code", type=int)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("strategy")
    parser.add_argument("--max-retries", type=int, default=None)
    parser.add_argument("--retry-exit-codes", default="")
    parser.add_argument("--command", action="store_true")
    return parser


def main(argv: list[str] | None = None) -> int:
    """`hpc-train epilogue STEP_EXIT_CODE RUN_DIR STRATEGY [options]`: what batch scripts from before the job
    body (hpc_train/injob/body.py) still run, a requeued one included."""
    args_list = sys.argv[1:] if argv is None else argv
    try:
        args = _parser().parse_args(args_list)
        retry_exit_codes = {int(code) for code in args.retry_exit_codes.split(",") if code.strip()}
    except ValueError:
        print("usage: hpc-train epilogue STEP_EXIT_CODE RUN_DIR STRATEGY [--max-retries N] "
              "[--retry-exit-codes C,...] [--command]", file=sys.stderr)
        return 2
    return after_the_step(args.code, args.run_dir, args.strategy, os.environ, args.max_retries, retry_exit_codes,
                          args.command)


def after_the_step(code: int, run_dir: Path, strategy: str, env: Mapping[str, str], max_retries: int | None = None,
                   retry_exit_codes: Collection[int] = (), command: bool = False,
                   go_on: Callable[[dict[str, str]], None] | None = None) -> int:
    """The job's exit code after a step that exited with `code`: 0 once it is requeued for a retry (or retried in
    its allocation: `go_on` receives the environment of the next attempt), or a parameter-server job whose chief
    finished; else the step's code. `max_retries` None: state.json's, or 3."""
    run_state = read_state(run_dir)
    code, warning = job_exit_code(code, strategy, run_state)
    if warning:
        _say(f"warning: {warning} ({run_dir})")
    if code == 0 or not_for_retrying(code, run_state):
        return code
    if max_retries is None:
        max_retries = int(run_state.get("max_retries", DEFAULT_MAX_RETRIES))
    return after_failure(code, run_dir, env, int(max_retries), set(retry_exit_codes), command, go_on)


def after_failure(code: int, run_dir: Path, env: Mapping[str, str], max_retries: int,
                  retry_exit_codes: set[int], command: bool,
                  go_on: Callable[[dict[str, str]], None] | None = None) -> int:
    """Diagnose, record, and retry or not; the job's exit code (0 once it is requeued for a retry, or retried in
    its allocation: `go_on` is given the next attempt's environment)."""
    job_id = env.get("SLURM_JOB_ID", "")
    slurm = SlurmClient.local(env)
    notes = attempts.read_notes(run_dir)
    if not job_id or not slurm.available("scontrol"):
        failure = diagnose(code, "", notes, (), command, retry_exit_codes)
        why = ("not a Slurm batch job, run it again to resume" if not job_id else "scontrol is not found here (a "
               "container without Slurm's commands?): resubmit it to resume")
        _say(f"failed: {failure.cause}; not retried: {why}")
        attempts.clear_notes(run_dir)
        return code
    job = slurm.show_job(job_id)
    if job.get("JobState", "RUNNING") != "RUNNING":  # Slurm requeued, cancelled or ended it: not ours to retry
        _say(f"the step failed (exit {code}) and the job is already {job['JobState']} (Slurm's doing): "
             "not retried here")
        attempts.clear_notes(run_dir)
        return code
    parts = ranks_components(slurm, job_id, env)
    if parts:
        job = {**job, "NodeList": ",".join(part.get("NodeList", "") for part in parts)}
    nodes = expand_nodes(job.get("NodeList", ""))
    states = slurm.node_states(None if parts else job.get("Partition") or None)
    usable, lost = usable_and_lost(states)
    failure = diagnose(code, attempt_log(log_tail(job), job_id), notes, sorted(lost & set(nodes)), command,
                       retry_exit_codes)
    history = attempts.history(run_dir)
    used = attempts.retries_used(history)
    needed = job.get("NumNodes", "1").split("-")[0]
    excluded = [node for part in parts or [job] for node in expand_nodes(part.get("ExcNodeList", ""))]
    excluded += [node for node in given_back(history) if node not in excluded]  # given back here (shrink.py)
    plan = plan_retry(failure, used, max_retries, excluded, usable if states else None,
                      nodes_needed(env, len(nodes)) if nodes else (int(needed) if needed.isdigit() else 1))
    entry = _entry(failure, plan, run_dir, job, env)
    attempt = entry["attempt"]
    total = attempts.attempts_allowed(history, max_retries)
    if plan.retry and go_on is not None and not parts:
        shrunk = shrink_here(run_dir, env, plan, nodes, entry, total)
        if shrunk is not None:
            go_on(shrunk)
            return 0
    if plan.retry:
        targets = component_exclusions(plan.exclude, parts, expand_nodes) if parts else None
        problem = requeue_excluding(job_id, plan.exclude, slurm, targets=targets)
        if problem is not None and problem.startswith("scontrol requeue"):
            entry = {**entry, "action": "failed", "why": f"not retried: {problem}"}
    attempts.record(run_dir, entry)
    attempts.clear_notes(run_dir)
    if entry["action"] == "retried":
        _say(attempts.describe(entry, attempt, total)
             + (f" (warning: {problem})" if problem else "") + f"; job {job_id} requeued")
        return 0
    _say(attempts.describe(entry, attempt, total))
    _say_each_failure([*history, entry])
    return code


def ranks_components(slurm: SlurmClient, job_id: str, env: Mapping[str, str]) -> list[dict[str, str]]:
    """A heterogeneous job's components that run its ranks, each from its own line of scontrol (show_job keeps the
    last one's: for a job whose data service has a partition of its own, the service's, servicecomponent.py); []
    for a plain job."""
    service = component_of(env)
    if env.get("SLURM_HET_SIZE", "1") in ("", "1") and service is None:
        return []
    parts = slurm.show_job_components(job_id)
    return parts[:service] if service is not None else parts


def shrink_here(run_dir: Path, env: Mapping[str, str], plan: RetryPlan, nodes: list[str], entry: dict[str, Any],
                total: int) -> dict[str, str] | None:
    """A node range's retry inside its allocation (shrink.py): the nodes to blame given back to Slurm, the attempt
    recorded and said; the next attempt's environment, or None when the job is to be requeued (why said here)."""
    from hpc_train.injob.pack.release import batch_host, give_back

    sized = attempt_nodes(env)
    choice = shrink.choose(sized is not None, plan.retry, plan.exclude, nodes, batch_host(env, nodes),
                           sized[1].least if sized else 1)
    if choice is None or not sized:
        return None
    if choice.why_not:
        _say(choice.why_not)
        return None
    problem, resized = give_back(env, choice.release, nodes)
    if problem is not None:
        _say(f"could not give {', '.join(choice.release)} back to Slurm ({problem}); the job is requeued without "
             f"{'it' if len(choice.release) == 1 else 'them'}")
        return None
    kept = str(len(choice.kept))  # (what Slurm's resize script says too; the step is sized by it: sizing.py)
    resized = {**resized, "SLURM_JOB_NUM_NODES": kept, "SLURM_NNODES": kept}
    entry = {**entry, shrink.IN_ALLOCATION: True, "released": list(choice.release), "released_at": round(time.time(), 3)}
    attempts.record(run_dir, entry)
    attempts.clear_notes(run_dir)
    _say(attempts.describe({key: value for key, value in entry.items() if key != "released"}, entry["attempt"], total))
    _say(shrink.released_line(choice.release, entry["released_at"], entry["attempt"], len(choice.kept), str(sized[1])))
    return resized


def _entry(failure: Failure, plan: RetryPlan, run_dir: Path, job: dict[str, str],
           env: Mapping[str, str]) -> dict[str, Any]:
    """The attempt as state.json keeps it: when, where, why, what was done, and where the run resumes from."""
    checkpoint_step, checkpoint_time = newest_checkpoint(run_dir / "checkpoints")
    last_step = attempts.read_progress(run_dir).get("global_step")  # this attempt's: the prologue removed the last
    entry: dict[str, Any] = {
        "time": round(time.time(), 3), "attempt": restart_count(env) + 1,
        "nodes": job.get("NodeList", ""), "kind": failure.kind, "cause": failure.cause, "after": failure.after,
        "action": "retried" if plan.retry else "failed", "excluded": list(plan.added),
    }
    if plan.why:
        entry["why"] = plan.why
    if checkpoint_step is not None:
        entry["checkpoint_step"], entry["checkpoint_time"] = checkpoint_step, checkpoint_time
        if isinstance(last_step, int):  # (a beat from before the checkpoint: none redone that it knows of)
            entry["steps_redone"] = max(0, last_step - checkpoint_step)
    return entry


def newest_checkpoint(folder: Path) -> tuple[int | None, float | None]:
    """The step and time of the newest checkpoint in a run's checkpoints folder (TensorFlow's `ckpt-STEP.index`)."""
    found = []
    for index in folder.glob("ckpt-*.index"):
        step = index.name[len("ckpt-"):-len(".index")]
        if step.isdigit():
            try:
                found.append((int(step), index.stat().st_mtime))
            except OSError:
                continue
    if not found:
        return None, None
    step, saved = max(found)
    return step, round(saved, 3)


def _say_each_failure(history: list[dict[str, Any]]) -> None:
    failures = attempts.failures(history)
    if len(failures) > 1:
        _say(f"{len(failures)} failures: " + "; ".join(
            f"attempt {attempt.get('attempt', number + 1)}: {attempt['cause']}"
            for number, attempt in enumerate(failures)))


def log_tail(job: dict[str, str]) -> str:
    """The end of the job log, where srun said which task ended the step (StdErr, or StdOut when they are one)."""
    for key in ("StdErr", "StdOut"):
        path = job.get(key, "")
        if not path or "%" in path:
            continue
        try:
            with open(path, "rb") as log:
                log.seek(max(0, os.fstat(log.fileno()).st_size - LOG_TAIL_BYTES))
                return log.read().decode(errors="replace")
        except OSError:
            continue
    return ""


def _say(message: str) -> None:
    print(f"{PREFIX}: {message}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
