"""A packed sweep's files in its run folder (`runs/NAME-JOBID/`): `pack.json`, the plan its script writes (each
trial's values, the share, the command), and `pack-state.json`, where its scheduler (injob/pack) keeps every
trial's state, share and runs, for status, report and a requeued job. A trial's cancel request is a file in the
trial's own folder, which the scheduler looks for. Their names are made here and nowhere else."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hpc_train.runs.state import read_json_object, write_json_atomically

PLAN = "pack.json"
STATE = "pack-state.json"
CANCEL = "cancel-requested"
# Rank 0 of a trial's step writes the node and GPUs Slurm gave the step here (the packer's wrapper).
STEP_GPUS = "step-gpus"


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
