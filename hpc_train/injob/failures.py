"""Why a step failed, and whether running it again could help: pure, from what the step left behind.

Three witnesses, in the order they are believed:

- the nodes Slurm now says are down (a lost node);
- the notes a failing rank left (attempts.py), and the watchdog's that the
  attempt hung (watchdog.py): a user function that raised and
  hpc-train's own refusals would fail again; a rank that lost contact with a
  peer names that peer;
- srun's own lines in the job log ("srun: error: node2: task 1: Killed"), the
  first of which is the task that ended the step (its peers are ended after it
  by --kill-on-bad-exit).

A task that died of a signal (SIGKILL, a segfault, the kernel's OOM killer), a
peer that stopped answering (frozen, or its link gone) and a node lost are
worth a retry on other nodes. A plain non-zero exit is the program's own
verdict, retried only when the user listed its code (--retry-exit-codes).
Memory Slurm says a task used beyond its request (OUT_OF_MEMORY) would be
used again: not retried.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from hpc_train.exitcodes import EXIT_LOST_PEER

# srun's line for each task that ended badly: "srun: error: node2: task 1: Killed", "... tasks 0-1: Exited with
# exit code 2".
_TASK_END = re.compile(r"^srun: error: (?P<node>[^\s:]+): tasks? (?P<tasks>[\d,\-]+): (?P<what>.+?)\s*$", re.M)
_EXITED = re.compile(r"^Exited with exit code (\d+)$")
# Slurm's own words for a task it killed for its memory (not TensorFlow's allocator warnings in a rank's output).
_OUT_OF_MEMORY = re.compile(r"^(?:srun: error: \S+: tasks? [\d,\-]+: Out Of Memory|slurmstepd\S*: error: Detected "
                            r"\d+ oom.kill event)", re.M)


@dataclass(frozen=True)
class TaskEnd:
    """One of srun's lines on a task that ended badly."""

    node: str
    task: int
    what: str  # "Killed", "Segmentation fault", "Exited with exit code 1", "Out Of Memory"

    @property
    def exit_code(self) -> int | None:
        """The task's exit code, or None when a signal ended it."""
        match = _EXITED.match(self.what)
        return int(match.group(1)) if match else None


@dataclass(frozen=True)
class Failure:
    kind: str  # node_down, hung, died, lost_peer, exit, out_of_memory, task_error, refused, unknown
    cause: str  # in words, for the history: "node2 task 1: Killed", "worker 1 stopped answering", "node3 down"
    after: str  # the same, after "retried after": "node2 task 1 was killed"
    blame: tuple[str, ...] = ()  # nodes worth excluding
    retryable: bool = True
    why_not: str = ""  # when not retryable: why, and what to do


def task_ends(log: str) -> list[TaskEnd]:
    """srun's lines on tasks that ended badly, in the order it said them (a range of tasks in one line each)."""
    ends = []
    for match in _TASK_END.finditer(log):
        for task in _task_numbers(match.group("tasks")):
            ends.append(TaskEnd(match.group("node"), task, match.group("what")))
    return ends


def _task_numbers(text: str) -> list[int]:
    numbers = []
    for part in text.split(","):
        first, _, last = part.partition("-")
        if first.isdigit() and (not last or last.isdigit()):
            numbers.extend(range(int(first), int(last or first) + 1))
    return numbers


def diagnose(step_code: int, log: str, notes: Sequence[dict[str, Any]], down: Collection[str],
             command: bool = False, retry_exit_codes: Collection[int] = ()) -> Failure:
    """What ended the step (`step_code`, srun's or the launcher's exit code), from the job log of this attempt,
    the ranks' notes, and the job's nodes Slurm says are down now."""
    if down:
        nodes = sorted(down)
        return Failure("node_down", f"{', '.join(nodes)} down", f"{', '.join(nodes)} went down", tuple(nodes))
    if hang := next((note for note in notes if note.get("kind") == "hung"), None):
        # The watchdog ended the step: whatever the ranks said after is its doing. Worth a retry from the
        # checkpoint (a file server back, a deadlock of one run's timing); no node to blame, all shared it.
        cause = str(hang.get("message") or "hung: no progress on any rank")
        return Failure("hung", cause, f"it {cause}")
    if stopping := _would_fail_again(notes):
        return stopping
    ends = task_ends(log)
    if _OUT_OF_MEMORY.search(log):
        where = next((f"{end.node} task {end.task}" for end in ends if end.what == "Out Of Memory"), "a task")
        return Failure("out_of_memory", f"{where}: Out Of Memory", f"{where} ran out of memory", retryable=False,
                       why_not="Slurm killed it for using more memory than the job asked for, which a retry would "
                               "use again: ask for more (--mem), or use less (a smaller batch_size)")
    first = ends[0] if ends else None
    if first is None and notes:  # no srun (the local launcher): the notes alone
        first = TaskEnd(str(notes[0].get("node", "?")), int(notes[0].get("rank", 0)), "")
    if first is None:
        return _from_code(step_code)
    note = next((note for note in notes if note.get("rank") == first.task), None)
    if first.exit_code is None and first.what:  # a signal: the task died under us
        return _died(first.node, first.task, first.what)
    if note is not None and note.get("kind") == "lost_peer":
        return _lost_peer(note)
    if note is not None and note.get("kind") == "signal":
        return _died(first.node, first.task, str(note.get("signal", "killed by a signal")))
    code = first.exit_code if first.exit_code is not None else int(note.get("code", step_code)) if note else step_code
    return _exited(first.node, first.task, code, command, retry_exit_codes, own_exit=note is not None)


def _would_fail_again(notes: Sequence[dict[str, Any]]) -> Failure | None:
    """A user function that raised, or hpc-train's own refusal, on any rank: the same would happen again."""
    for kind, words in (("task_error", "the task module failed"), ("refused", "hpc-train refused to go on")):
        note = next((note for note in notes if note.get("kind") == kind), None)
        if note is not None:
            message = str(note.get("message", "")).splitlines()[0] if note.get("message") else words
            where = f"{note.get('node', '?')} task {note.get('rank', '?')}"
            return Failure(kind, f"{where}: {message}", f"{where}: {message}", retryable=False,
                           why_not=f"{words}, which a retry would do again: fix it, then resubmit (the run resumes "
                                   "from its last checkpoint)")
    return None


def _died(node: str, task: int, what: str) -> Failure:
    return Failure("died", f"{node} task {task}: {what}", f"{node} task {task} was {what.lower()}"
                   if what in ("Killed", "Terminated", "Aborted") else f"{node} task {task} died ({what})", (node,))


def _lost_peer(note: dict[str, Any]) -> Failure:
    peers = [str(peer) for peer in note.get("peers", []) if peer]
    lost = str(note.get("lost") or "a peer")  # "worker 1", "ps 0"
    nodes = tuple(dict.fromkeys(peer.split(":")[0] for peer in peers))
    cause = f"{lost} stopped answering" + (f" (on {', '.join(nodes)})" if nodes else "")
    return Failure("lost_peer", cause, cause, nodes)


def _exited(node: str, task: int, code: int, command: bool, retry_exit_codes: Collection[int],
            own_exit: bool = False) -> Failure:
    where = f"{node} task {task}"
    if code in retry_exit_codes:
        return Failure("exit", f"{where}: exit {code}", f"{where} exited with {code} (--retry-exit-codes)", (node,))
    if code == EXIT_LOST_PEER and not command:  # the trainer lost a peer but could not leave its note
        return Failure("lost_peer", "a peer stopped answering", "a peer stopped answering")
    if code >= 128 and not own_exit:  # no note, so no supervisor: the shell's way of saying a signal ended it
        return _died(node, task, f"signal {code - 128}")
    fix = ("list it in --retry-exit-codes to retry it" if command
           else "see its log; fix the cause, then resubmit (the run resumes from its last checkpoint)")
    return Failure("exit", f"{where}: exit {code}", f"{where} exited with {code}", retryable=False,
                   why_not=f"exit {code} is the program's own verdict, which a retry would repeat: {fix}")


def _from_code(step_code: int) -> Failure:
    """Nothing said which task failed: only the step's code."""
    if step_code >= 128:
        return Failure("died", f"the step ended by signal {step_code - 128}",
                       f"the step was ended by signal {step_code - 128}")
    return Failure("unknown", f"the step failed with exit {step_code}", f"the step failed with exit {step_code}",
                   retryable=False, why_not="nothing says a retry would help: see the job log")
