"""A packed sweep's files in its run folder (`runs/NAME-JOBID/`): `pack.json`, the plan its script writes (each
trial's values, the share, the command), and `pack-state.json`, where its scheduler (injob/pack) keeps every
trial's state, share and runs, for status, report and a requeued job. A trial's cancel request is a file in the
trial's own folder, which the scheduler looks for. Their names are made here and nowhere else."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from hpc_train.runs.state import read_json_object, write_json_atomically

PLAN = "pack.json"
STATE = "pack-state.json"
CANCEL = "cancel-requested"
# Rank 0 of a trial's step writes the node and GPUs Slurm gave the step here (the packer's wrapper).
STEP_GPUS = "step-gpus"
TIMELINE = "pack-timeline.png"
# A trial's state in the pack, as Slurm would say a job array element's (what report and list read).
AS_SLURM = {"waiting": "PENDING", "running": "RUNNING", "done": "COMPLETED", "pruned": "COMPLETED",
            "failed": "FAILED", "cancelled": "CANCELLED"}
COLOURS = {"done": "tab:green", "pruned": "tab:olive", "crashed": "tab:red", "failed": "tab:red",
           "cancelled": "tab:gray", "requeued": "tab:blue", "node lost": "tab:orange", "running": "tab:cyan"}


def read_plan(folder: Path) -> dict[str, Any]:
    return read_json_object(folder / PLAN)


def read_pack_state(folder: Path) -> dict[str, Any]:
    """What the scheduler last wrote ({} before it started)."""
    return read_json_object(folder / STATE)


def write_pack_state(folder: Path, state: dict[str, Any]) -> None:
    write_json_atomically(folder / STATE, state)


def request_cancel(trial_folder: Path) -> None:
    """Ask the scheduler to end one trial (cancel JOBID_I): the others go on."""
    (trial_folder / CANCEL).write_text("cancel\n")


def cancel_requested(trial_folder: Path) -> bool:
    return (trial_folder / CANCEL).is_file()


def step_gpus(trial_folder: Path) -> str:
    """The node and GPUs Slurm gave the trial's step, as its rank 0 wrote them ("" before)."""
    try:
        return (trial_folder / STEP_GPUS).read_text().strip()
    except OSError:
        return ""


def trial_rows(state: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """Each trial's entry of the pack state, by index."""
    return {int(entry["index"]): entry for entry in state.get("trials", []) if "index" in entry}


def released_lines(state: dict[str, Any]) -> list[str]:
    """`released pk2 at 12:03:41, 3 trials done there`: each node the pack gave back to Slurm, in order (pure but
    for the local time of day)."""
    return [f"released {entry['node']} at {time.strftime('%H:%M:%S', time.localtime(float(entry['at'])))}, "
            f"{int(entry.get('done') or 0)} trial{'' if int(entry.get('done') or 0) == 1 else 's'} done there"
            for entry in state.get("released") or [] if isinstance(entry, dict) and "node" in entry and "at" in entry]


def released_at(state: dict[str, Any]) -> dict[str, float]:
    """Each node given back, and when (pure)."""
    return {entry["node"]: float(entry["at"]) for entry in state.get("released") or []
            if isinstance(entry, dict) and "node" in entry and isinstance(entry.get("at"), (int, float))}


def held_nodes(state: dict[str, Any]) -> dict[str, int]:
    """The nodes the job holds (its shares', in order, less those given back) and how many trials run on each now
    (pure)."""
    gone = released_at(state)
    held = {node: 0 for entry in state.get("slots") or [] for node in entry.get("nodes") or [] if node not in gone}
    for entry in state.get("trials", []):
        if entry.get("state") == "running":
            for node in (entry.get("runs") or [{}])[-1].get("nodes") or []:
                held[node] = held.get(node, 0) + 1
    return held


def slurm_states(state: dict[str, Any], count: int) -> dict[int, str]:
    """Each trial's state in Slurm's words, by index (PENDING before the pack wrote any) (pure)."""
    rows = trial_rows(state)
    return {index: AS_SLURM.get(rows.get(index, {}).get("state", "waiting"), "UNKNOWN") for index in range(count)}


def timeline_bars(state: dict[str, Any], now: float) -> list[tuple[int, float, float, str, str]]:
    """The allocation's timeline: (slot, start, length, label, how) for every attempt of every trial, seconds from
    the first start, labelled by the trial's index and the GPUs Slurm gave it; a run not ended yet lasts until
    `now` (pure)."""
    runs = [(entry["index"], run) for entry in state.get("trials", []) for run in entry.get("runs") or []]
    if not runs:
        return []
    first = min(run["started"] for _, run in runs)
    return [(int(run["slot"]), run["started"] - first, (run.get("ended") or now) - run["started"],
             f"{index}" + (f" (GPU {run['gpus']})" if run.get("gpus") else ""), run.get("how") or "running")
            for index, run in runs]


def given_back_bars(state: dict[str, Any], end: float) -> list[tuple[int, float, float]]:
    """(slot, start, length) from when each share's node went back to Slurm to the timeline's `end` (seconds from
    the first start, as timeline_bars') (pure)."""
    starts = [run["started"] for entry in state.get("trials", []) for run in entry.get("runs") or []]
    if not starts:
        return []
    gone, first = released_at(state), min(starts)
    bars = []
    for entry in state.get("slots") or []:
        went = [max(0.0, gone[node] - first) for node in entry.get("nodes") or [] if node in gone]
        if went:
            bars.append((int(entry["index"]), min(went), max(0.0, end - min(went))))
    return bars


def draw_timeline(state: dict[str, Any], path: Path, now: float) -> bool:
    """pack-timeline.png: a row per share (its node), a bar per trial's attempt, coloured by how it ended, and when
    a share's node was given back to Slurm (hatched from then on); False without matplotlib or runs."""
    bars = timeline_bars(state, now)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    if not bars:
        return False
    slots = state.get("slots") or []
    figure, axis = plt.subplots(figsize=(10, 1 + 0.5 * max(1, len(slots))))
    for slot, start, length, label, how in bars:
        axis.barh(slot, length, left=start, color=COLOURS.get(how, "tab:purple"), edgecolor="black")
        axis.text(start + length / 2, slot, label, ha="center", va="center", fontsize=8)
    for slot, start, length in given_back_bars(state, max(start + length for _, start, length, _, _ in bars)):
        axis.barh(slot, length, left=start, color="none", hatch="//", edgecolor="tab:gray")  # held no more
        axis.text(start, slot, " given back", ha="left", va="center", fontsize=7)
    axis.set_yticks([entry["index"] for entry in slots],
                    [f"{','.join(entry['nodes'])} #{entry['index']}" for entry in slots])
    axis.set_xlabel("seconds since the first trial started")
    axis.set_title("trials by share: " + ", ".join(f"{how} ({colour.removeprefix('tab:')})"
                                                  for how, colour in COLOURS.items()
                                                  if any(bar[4] == how for bar in bars)), fontsize=9)
    axis.invert_yaxis()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return True
