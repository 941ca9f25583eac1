"""`hpc-train doctor --container IMAGE`: the test step's ranks started in the image as a job's would be (the body's
own wrapping, injob/contained.py), and whether the runtime is on the nodes and a rank started inside (pure judge)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from hpc_train.config import DATA_DIR_VARIABLE
from hpc_train.container.runtime import EXECUTABLES, Container
from hpc_train.doctor.checks import Check
from hpc_train.injob.contained import container_step

# Where the step's ranks find the staged hpc-train (a job's is its run folder): beside the runs a job would write.
DOCTOR_FOLDER = Path("runs") / ".hpc-train-doctor"


def contained_command(container: Container, command: Sequence[str], data_dir: str | None,
                      env: Mapping[str, str]) -> list[str]:
    """srun's options and the ranks' command that run the test step's `command` in the image."""
    options, argv = container_step(container, DOCTOR_FOLDER.absolute(), command,
                                   {**env, **({DATA_DIR_VARIABLE: data_dir} if data_dir else {})})
    return [*options, *argv]


def container_check(container: Container, reports: Sequence[dict], nodes: int, failure: str) -> Check:
    """Whether every rank started inside the image (its report says its runtime), else why not, with the fix."""
    executable = EXECUTABLES[container.runtime]
    inside = [report for report in reports if report.get("container") == container.runtime]
    if reports and len(inside) == len(reports) >= nodes:
        return Check("container", True, f"{container.runtime}: {executable} on the nodes; {len(inside)} rank(s) "
                                        f"started in {container.image}")
    if not inside and (f"execve(): {executable}" in failure or f"{executable}: not found" in failure
                       or "container-image" in failure):
        return Check("container", False, f"{executable} is not on the nodes ({failure})",
                     f"install {container.runtime} there (or load its module in the job's environment)")
    return Check("container", False, f"{len(inside)} of {nodes} rank(s) started in {container.image}"
                                     f"{f' ({failure})' if failure else ''}",
                 "see the line above: the image's TensorFlow, a mount, or the runtime's own error")
