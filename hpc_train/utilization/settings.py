"""How often a node is sampled and what counts as an idle GPU: read from the job's environment (pure).

The settings travel with the job's environment to every node (Slurm exports the submitting shell's), so the
trainer, a user's command and the job body read the same ones, and config.py does not grow:

- HPC_TRAIN_SAMPLE_SECONDS: seconds between samples (default 10); 0 turns sampling off;
- HPC_TRAIN_IDLE_PERCENT: a GPU under this utilization is idle (default 5);
- HPC_TRAIN_IDLE_MINUTES: ... once it has been for this long (default 5), when it is named;
- HPC_TRAIN_LEDGER=0, the one switch for everything a job measures of itself, turns sampling off too.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from hpc_train.errors import HpcTrainError
from hpc_train.runs.goodput import ledger_on

SECONDS_VARIABLE = "HPC_TRAIN_SAMPLE_SECONDS"
PERCENT_VARIABLE = "HPC_TRAIN_IDLE_PERCENT"
MINUTES_VARIABLE = "HPC_TRAIN_IDLE_MINUTES"


@dataclass(frozen=True)
class Sampling:
    """What the node samplers and the idle watch do."""

    every: float = 10.0  # seconds between samples; 0: off
    idle_below: float = 5.0  # percent
    idle_after: float = 300.0  # seconds under idle_below before a GPU is named

    @property
    def on(self) -> bool:
        return self.every > 0

    @classmethod
    def from_environment(cls, env: Mapping[str, str]) -> "Sampling":
        """The settings the environment names, the defaults for the rest; a bad value is one line naming it."""
        default = cls()
        every = _number(env, SECONDS_VARIABLE, default.every, "seconds between samples, 0 to turn sampling off")
        below = _number(env, PERCENT_VARIABLE, default.idle_below, "a percentage, e.g. 5")
        minutes = _number(env, MINUTES_VARIABLE, default.idle_after / 60, "minutes, e.g. 5")
        if below > 100:
            raise HpcTrainError(f"{PERCENT_VARIABLE}={env[PERCENT_VARIABLE]}: expected a percentage, 0 to 100")
        return cls(every if ledger_on(env) else 0.0, below, minutes * 60)


def _number(env: Mapping[str, str], name: str, default: float, expected: str) -> float:
    text = env.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not math.isfinite(value) or value < 0:
        raise HpcTrainError(f"{name}={text!r}: expected {expected}; unset it for the default ({default:g})")
    return value
