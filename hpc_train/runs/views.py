"""What `status`, `list`, `report` and the demo show of run folders: computed here, printed by the CLI.

A view is a pure function from a job's record, what its folder holds (`RunFiles`: state.json, metrics.json,
the retries allowed) and what Slurm says of it (passed in: the CLI asks Slurm) to the lines shown. Reading a
folder (`read_run`, `chief_log`) is the edge; nothing here asks Slurm, and nothing imports the CLI.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpc_train.runs import attempts, compare
from hpc_train.runs.columns import aligned, value_text
from hpc_train.runs.folders import JobRecord, element_folder, element_id, rank_text
from hpc_train.runs.metrics import epochs_in, metrics_path, read_metrics
from hpc_train.runs.objective import default_objective
from hpc_train.runs.stacks import newest_chief_top
from hpc_train.runs.state import read_state
from hpc_train.runs.study import read_trial
from hpc_train.slurm.follow import PROGRESS

SWEEP_COLUMNS = ["STATE", "EPOCH", "LAST VALIDATION", "RETRIES"]
LIST_HEADER = ("JOBID", "NAME", "STATE", "SUBMITTED", "FOLDER")


@dataclass(frozen=True)
class RunFiles:
    """What a run folder says of its run, read once."""

    state: Mapping[str, Any] = field(default_factory=dict)  # state.json
    metrics: Mapping[str, Any] = field(default_factory=dict)  # metrics.json
    max_retries: Any = None  # state.json's, else config.yaml's (read only for a run with a history); None: neither
    stacks: tuple[str, tuple[str, ...]] = ("", ())  # a hung attempt's rank 0 stacks: file name, innermost frames
    drawn: Mapping[str, Any] = field(default_factory=dict)  # an adaptive search's values, once drawn (trial.json)

    @property
    def epochs(self) -> list[dict[str, Any]]:
        return epochs_in(self.metrics)

    @property
    def history(self) -> list[dict[str, Any]]:
        return attempts.recorded(self.state)

    @property
    def retries(self) -> int:
        return attempts.retries_used(self.history)


@dataclass(frozen=True)
class SlurmView:
    """What Slurm says of a job, as `status` asked it (sacct, else scontrol or squeue)."""

    state: str
    exit_code: str
    elapsed: str
    requeues: int
    source: str  # where the state came from, in words
    nodes: str = ""
    waiting: str = ""  # why a pending job waits, in words
    ended: bool = False
    partition: str = ""  # the one it got (of `--partition a,b`: Slurm's list until it starts); "": not said


# A job Slurm no longer knows (scontrol and squeue forgot it, no accounting): its run folder tells how it ended.
FROM_FOLDER = "from the run folder"


def folder_view(run: RunFiles, local: bool = False) -> SlurmView:
    """`status` of a job Slurm no longer knows (`local`: never knew, run here): how its run folder says it ended
    (attempts.how_it_ended), the last attempt's nodes, and the attempts' time and count."""
    ended = attempts.how_it_ended(run.state)
    state, code = ended or ("UNKNOWN", "")
    seconds, count = attempts.seconds_run(run.state), attempts.current_attempt(run.state)
    elapsed = ("?" if seconds is None else duration(seconds)) + (
        f" ({count} attempt{'s' if count > 1 else ''})" if count else "")
    why = "run here, not under Slurm" if local else "Slurm no longer knows the job"
    source = f"{FROM_FOLDER}: {why}" if ended else f"{why}, and its run folder records no end"
    return SlurmView(state, code, elapsed, 0, source, attempts.last_nodes(run.state), ended=ended is not None)


def job_elapsed(slurm: SlurmView, run: RunFiles) -> str:
    """The job's elapsed time, every attempt's: Slurm's is its newest attempt's alone, so a requeued job's earlier
    attempts (state.json's ends) are added to it; the run folder's own (folder_view) is the job's already."""
    earlier, seconds = attempts.earlier_seconds(run.state), slurm_seconds(slurm.elapsed)
    if not earlier or seconds is None or slurm.source.startswith((FROM_FOLDER, "Slurm no longer knows", "run here")):
        return slurm.elapsed
    count = attempts.current_attempt(run.state)
    return f"{duration(earlier + seconds)} ({count} attempts)"


def slurm_seconds(elapsed: str) -> float | None:
    """Slurm's elapsed time (1-02:03:04, 02:03:04, 03:04) in seconds; None for what is not one (pure)."""
    days, _, clock = elapsed.strip().rpartition("-")
    parts = clock.split(":")
    if not (days.isdigit() or not days) or not 2 <= len(parts) <= 3 or not all(part.isdigit() for part in parts):
        return None
    seconds = 0
    for part in parts:
        seconds = seconds * 60 + int(part)
    return (int(days) * 86400 if days else 0) + seconds


def duration(seconds: float) -> str:
    """Seconds as Slurm says an elapsed time: 00:01:05, 1-02:00:00 (pure)."""
    minutes, second = divmod(round(seconds), 60)
    hours, minute = divmod(minutes, 60)
    days, hour = divmod(hours, 24)
    return (f"{days}-" if days else "") + f"{hour:02d}:{minute:02d}:{second:02d}"


def known_state(slurm_state: str, run: RunFiles) -> str:
    """Slurm's state of a job; of one it no longer knows, the run folder's, marked so: "COMPLETED (from the run
    folder)"; "UNKNOWN" where the folder records no end either."""
    ended = attempts.how_it_ended(run.state) if slurm_state.upper() == "UNKNOWN" else None
    return f"{ended[0]} ({FROM_FOLDER})" if ended else slurm_state


def read_run(folder: Path) -> RunFiles:
    """The run folder's state.json and metrics.json (empty where there are none) and the retries it allows."""
    state = read_state(folder)
    max_retries = state.get("max_retries")
    if max_retries is None and attempts.recorded(state):
        max_retries = settings_max_retries(folder)
    name, frames = newest_chief_top(folder) if attempts.recorded(state) else ("", [])
    return RunFiles(state, read_metrics(folder), max_retries, (name, tuple(frames)),
                    dict(read_trial(folder).get("values") or {}))


def settings_max_retries(folder: Path) -> Any:
    """config.yaml's max_retries (the job's settings), None where it says none or cannot be read."""
    import yaml

    try:
        return (yaml.safe_load((folder / "config.yaml").read_text()) or {}).get("max_retries")
    except (OSError, yaml.YAMLError, AttributeError):
        return None


def chief_log(record: JobRecord) -> list[str] | None:
    """The chief's (rank 0's) log, a line each; None before there is one."""
    text = rank_text(record, 0)
    return None if text is None else text.splitlines()


def history_lines(run: RunFiles, default_max_retries: int) -> list[str]:
    """The job's history of failures, retries and requeues (state.json's attempts), a line each."""
    history = run.history
    if not history:
        return []
    allowed = run.max_retries if isinstance(run.max_retries, int) else default_max_retries
    total = attempts.attempts_allowed(history, int(allowed))
    return [attempts.describe(attempt, int(attempt.get("attempt", number + 1)), total)
            for number, attempt in enumerate(history)]


# Lines a command's rank log holds that are not the command's: submitit's, and the bootstrap's rank line and
# notes (bootstrap/startup.py's PREFIX). Slurm copies a task's stdout and stderr through separate pipes, so the
# bootstrap's line, written before the command starts, can land after a quick command's own output.
NOT_THE_COMMANDS = ("submitit ", "hpc-train bootstrap: ")


def last_progress(record: JobRecord, log: Sequence[str] | None) -> str:
    """The trainer's last progress line; of a user's command, its last line (not submitit's nor the bootstrap's)."""
    if log is None:
        return "no progress yet"
    lines = ([line for line in log if line.strip() and not line.startswith(NOT_THE_COMMANDS)] if record.command
             else [match.group(1) for match in map(PROGRESS.match, log) if match])
    return lines[-1] if lines else "no progress yet"


def job_lines(record: JobRecord, slurm: SlurmView, run: RunFiles, log: Sequence[str] | None,
              default_max_retries: int) -> list[str]:
    """`hpc-train status JOBID`: the state, nodes, command, requeues, history, wait, elapsed time, last line."""
    exit_code = f", exit {slurm.exit_code}" if slurm.exit_code and slurm.ended else ""
    lines = [f"job {record.job_id} ({record.name}): {slurm.state.lower()}{exit_code} [{slurm.source}]",
             f"  nodes:   {slurm.nodes or 'none yet'} ({attempts.last_tasks(run.state) or record.tasks} tasks, "
             f"{record.strategy})"
             f"{partition_words(slurm)}",
             *component_lines(record), f"  runs:    {record.what}"]
    if slurm.requeues:
        lines.append(f"  again:   requeued {slurm.requeues} time{'s' if slurm.requeues > 1 else ''}")
    if sizes := attempts.attempt_sizes(run.state):  # a node range: each attempt's size
        lines.append("  sizes:   " + "; ".join(f"attempt {number} {words}" for number, words in sizes))
    lines += [f"  history: {line}" for line in history_lines(run, default_max_retries)]
    if run.stacks[0]:  # an attempt hung: where rank 0 was (all of it: hpc-train logs JOBID --stacks)
        lines += [f"  stacks:  rank 0 ({run.stacks[0]}, innermost first; all: hpc-train logs {record.job_id} "
                  "--stacks)", *(f"    {frame}" for frame in run.stacks[1])]
    if slurm.waiting:
        lines.append(f"  waiting: {slurm.waiting}")
    return lines + [f"  elapsed: {job_elapsed(slurm, run)}", f"  last:    {last_progress(record, log)}",
                    f"  folder:  {record.folder}"]


def partition_words(slurm: SlurmView) -> str:
    """Where the job runs: ", partition gpu"; while it waits for one of several, ", partition gpu or debug"."""
    names = [name for name in slurm.partition.split(",") if name]
    return f", partition {' or '.join(names)}" if names else ""


def component_lines(record: JobRecord) -> list[str]:
    """A heterogeneous job's components, a line each: partition, nodes, tasks and their roles, GPUs."""
    return [f"  part {index}:  {part.get('partition') or 'default partition'}, {part.get('nodes') or '?'} node(s), "
            f"{part.get('tasks')} task(s) ({', '.join(part.get('roles') or [])}), "
            f"{gpu_count(part.get('gpus_per_node'))} GPU(s) per node" for index, part in enumerate(record.components or [])]


def gpu_count(gpus: int | None) -> str:
    """GPUs per node as a component's line says them: "no", a number, or "?" where Slurm did not say."""
    return "no" if gpus == 0 else "?" if gpus is None else str(gpus)


def shown_state(slurm_state: str, run: RunFiles) -> str:
    """Slurm's state of a sweep element (its folder's once Slurm forgot it: known_state), or "pruned@E" when it
    stopped itself at epoch E (state.json)."""
    return f"pruned@{run.state.get('epoch')}" if run.state.get("state") == "pruned" else \
        known_state(slurm_state, run).lower()


def last_validation(figures: Mapping[str, Any]) -> str:
    """An epoch's objective (the default one) where it logs it, else its first validation figure; "-": none."""
    name = default_objective(figures)
    if name not in figures:
        name = next((key for key in figures if key.startswith("val_")), None)
    return f"{name} {figures[name]:.4f}" if name and isinstance(figures.get(name), (int, float)) else "-"


def element_row(slurm_state: str, run: RunFiles) -> list[str]:
    """A sweep element's state, epoch ("2/3"), last validation figure and retries; "-" for what it has not yet."""
    epochs = run.epochs
    total = (run.metrics.get("config") or {}).get("epochs")
    epoch = f"{len(epochs)}/{total}" if epochs and total else (str(len(epochs)) if epochs else "-")
    return [shown_state(slurm_state, run), epoch, last_validation(epochs[-1] if epochs else {}), str(run.retries)]


def counts_text(states: Iterable[str]) -> str:
    """States counted, the most frequent first: "2 pending, 1 completed, 1 running"."""
    return ", ".join(f"{count} {state}" for state, count in Counter(states).most_common())


def sweep_lines(record: JobRecord, runs: Sequence[RunFiles], states: Mapping[int, str]) -> list[str]:
    """`hpc-train status ARRAYID`: the counts, then a row per element (its values, state, epoch, figure, retries).
    `runs`: each element's folder, by index; `states`: Slurm's state of each element, by index."""
    values = element_values(record, runs)
    keys = report_keys(record, runs)
    rows = [element_row(states.get(index, "UNKNOWN"), run) for index, run in enumerate(runs)]
    table = aligned([["INDEX", *keys, *SWEEP_COLUMNS]] + [
        [str(index), *(value_text(element.get(key, "-")) for key in keys), *row]
        for index, (element, row) in enumerate(zip(values, rows))])
    counts = counts_text(row[0].split("@")[0] for row in rows)
    return [f"sweep {record.job_id} ({record.name}): {len(values)} elements: {counts}", *(f"  {row}" for row in table),
            f"  folders: {element_folder(record, 'INDEX')}/ (hpc-train logs {element_id(record.job_id, 'INDEX')})"]


def packed_lines(record: JobRecord, runs: Sequence[RunFiles], pack: Mapping[str, Any],
                 gpus: Mapping[int, str]) -> list[str]:
    """`hpc-train status JOBID` of a packed sweep: a row per trial with where it runs (or ran): its node(s) and the
    GPUs Slurm gave its step (`gpus`, by index), from its scheduler's state (`pack`: runs/packed.py)."""
    from hpc_train.runs.packed import held_nodes, released_lines, trial_rows

    rows = trial_rows(dict(pack))
    values = element_values(record, runs)
    keys = report_keys(record, runs)
    table, states = [["INDEX", *keys, "STATE", "WHERE", *SWEEP_COLUMNS[1:]]], []
    for index, (element, run) in enumerate(zip(values, runs)):
        entry = rows.get(index, {})
        row = element_row(entry.get("state", "waiting"), run)
        last = (entry.get("runs") or [{}])[-1]
        where = ",".join(last.get("nodes") or []) or "-"
        if gpus.get(index) and entry.get("state") == "running":
            where = f"{where} (GPUs {gpus[index].partition(' ')[2] or '-'})"
        states.append(row[0])
        table.append([str(index), *(value_text(element.get(key, "-")) for key in keys), row[0], where, *row[1:3],
                      str(max(0, int(entry.get("attempts", 1) or 1) - 1 - int(entry.get("requeues", 0))
                              - int(entry.get("losses", 0))))])  # (a resume after a requeue or a lost node: none)
    return [f"packed sweep {record.job_id} ({record.name}): {len(values)} trials: {counts_text(states)}",
            *(f"  {row}" for row in aligned(table)),
            *([f"  nodes:   {', '.join(f'{node} ({count} running)' for node, count in held_nodes(dict(pack)).items())}"
               " (held by the job)"] if pack.get("slots") else []),
            *([f"  lost:    {', '.join(pack['lost'])} (their trials restarted on the shares left)"]
              if pack.get("lost") else []),
            *(f"  {line}" for line in released_lines(dict(pack))),
            f"  folders: {element_folder(record, 'INDEX')}/ (hpc-train logs {element_id(record.job_id, 'INDEX')}; "
            f"hpc-train cancel {element_id(record.job_id, 'INDEX')} ends one trial)"]


def listed(records: Iterable[JobRecord], limit: int) -> list[JobRecord]:
    """The jobs `list` shows, newest first: a sweep once (its elements are in its counts)."""
    return [record for record in records if not record.is_element][:limit]


def sweep_counts(states: Mapping[int, str]) -> str:
    """A sweep's elements by Slurm state, for `list`: "sweep: 2 completed, 1 running, 1 pending"."""
    return f"sweep: {counts_text(state.lower() for state in states.values())}"


def list_lines(records: Sequence[JobRecord], states: Mapping[str, str], runs: Mapping[str, RunFiles]) -> list[str]:
    """`hpc-train list`: a row per job, in columns as wide as their widest cell (a local run's id is long);
    `states`: Slurm's (or a sweep's counts), by job id, the local jobs aside; a job Slurm no longer knows: its
    folder's (known_state)."""
    rows = [LIST_HEADER]
    for record in records:
        state = "local" if record.is_local else known_state(states[record.job_id], runs[record.job_id])
        retries = runs[record.job_id].retries
        if retries:  # (one parenthesis: "completed (from the run folder, 1 retry)")
            said = f"{retries} {'retry' if retries == 1 else 'retries'}"
            state = f"{state[:-1]}, {said})" if state.endswith(")") else f"{state} ({said})"
        if sizes := attempts.attempt_sizes(runs[record.job_id].state):  # a node range: the newest attempt's size
            state = f"{state[:-1]}, {sizes[-1][1]})" if state.endswith(")") else f"{state} ({sizes[-1][1]})"
        rows.append((record.job_id, record.name[:24], state.lower(), record.submitted_text, record.folder))
    return aligned(rows)


def report_elements(record: JobRecord, runs: Sequence[RunFiles], states: Mapping[int, str]) -> list[compare.Element]:
    """What `report` compares: a sweep's elements (their values, shown state and epochs), or the one job's run
    (`runs` and `states` with one entry, index 0)."""
    if not record.is_sweep:
        return [compare.Element(0, {}, states[0], runs[0].epochs)]
    return [compare.Element(index, element, shown_state(states.get(index, "UNKNOWN"), run), run.epochs)
            for index, (element, run) in enumerate(zip(element_values(record, runs), runs))]


def element_values(record: JobRecord, runs: Sequence[RunFiles]) -> list[dict[str, Any]]:
    """Each element's values: the grid's, or those its trial drew as it started ({} before)."""
    return [dict(element) or dict(run.drawn) for element, run in zip(record.elements or [], runs)]


def report_keys(record: JobRecord, runs: Sequence[RunFiles]) -> list[str]:
    """The keys a sweep varies (none for one job): the grid's, or those its trials drew."""
    values = element_values(record, runs) if record.is_sweep else []
    return list(dict.fromkeys(key for element in values for key in element))


def demo_lines(job_id: str, state: str, code: str, log: Path, seconds: float, folder: Path | None,
               metrics: Mapping[str, Any]) -> list[str]:
    """The demo's ending: the job's state and log, then what it trained where its folder has figures
    (`metrics`: its metrics.json, {} for none)."""
    lines = [f"\nhpc-train demo: job {job_id} {state.lower()} (exit {code or '?'}) after {seconds:.0f} s",
             f"  log:     {log}"]
    if folder is None or not metrics:
        return lines
    totals = metrics["totals"]
    return lines + [
        f"  result:  validation accuracy {totals.get('final_val_accuracy', float('nan')):.4f} after "
        f"{totals['epochs']} epochs on {metrics['world_size']} tasks ({metrics['strategy']}), "
        f"{totals['seconds']:.1f} s of training at {totals['images_per_second']:.0f} images/s",
        f"  model:   {folder / 'model.keras'}", f"  metrics: {metrics_path(folder)}"]
