"""What a job's batch script does once its step has ended with a failure: decide the job's exit code.

Written once, here, and called by every batch script hpc-train makes or
ships: slurm/step.sh and templates/job.sbatch as `hpc-train epilogue
STEP_EXIT_CODE RUN_DIR STRATEGY` (the hpc-train their ranks run), submit's
submitit script as `PYTHON -m hpc_train.jobs.epilogue ...` (the Python that
runs its ranks); only when the step failed (a step that succeeded needs no
decision, and no Python start). Its exit 0 turns the job into a success; any other exit leaves
the step's code as the job's, so an epilogue that cannot even start (no
Python, no hpc-train where the batch script runs) changes nothing. It decides:

- a parameter-server step whose chief finished training on the workers left
  (state.json says "finished") did its work: the job ends as completed, with a
  warning naming the step's failure;
- otherwise the step's own code stands.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

STATE_FILE = "state.json"


def job_exit_code(step_code: int, strategy: str, run_state: dict) -> tuple[int, str | None]:
    """The job's exit code after its step, and a warning to print, if any (pure)."""
    if step_code != 0 and strategy == "parameter_server" and run_state.get("state") == "finished":
        return 0, (f"a task of the step failed (exit {step_code}), but the chief finished training on the workers "
                   "left and saved everything: the job ends as completed")
    return step_code, None


def read_state(run_dir: Path) -> dict:
    """The chief's state.json, or nothing when it is missing or unreadable (the step's code then stands)."""
    try:
        state = json.loads((run_dir / STATE_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def shell_lines(python: str, run_dir: str, strategy: str) -> list[str]:
    """The batch script's lines right after its step (`$?` still the step's code): run the epilogue on a failure.

    `python` is a command line (already quoted where it needs to be); `run_dir` is a shell word (quoted by the
    caller, it may expand a variable); `strategy` is quoted here.
    """
    return [
        "code=$?",
        f'if [ "$code" -ne 0 ]; then {python} -m hpc_train.jobs.epilogue "$code" {run_dir} {shlex.quote(strategy)} '
        "&& code=0; fi",
        'exit "$code"',
    ]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3 or not args[0].lstrip("-").isdigit():
        print("usage: python -m hpc_train.jobs.epilogue STEP_EXIT_CODE RUN_DIR STRATEGY", file=sys.stderr)
        return 2
    code, warning = job_exit_code(int(args[0]), args[2], read_state(Path(args[1])))
    if warning:
        print(f"hpc-train: warning: {warning} ({args[1]})", file=sys.stderr, flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
