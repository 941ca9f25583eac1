"""The objective: the figure a sweep's runs are compared by, and which way is better. The one rule.

`hpc-train report` ranks by it, pruning (training/pruning.py) stops an element in its worse half, and `status`
shows it as a sweep element's last validation figure. Unless the user names one (`--objective`, the setting
`objective:`), it is val_accuracy where the runs log it, else val_loss (the built-in task's, and most tasks').
Its direction follows its name: a loss (or an error) is minimised, anything else maximised.
"""

from __future__ import annotations

from collections.abc import Iterable

PREFERRED = "val_accuracy"
FALLBACK = "val_loss"
# Words in a figure's name that make lower better.
LOWER_IS_BETTER = ("loss", "error")


def default_objective(names: Iterable[str]) -> str:
    """val_accuracy where the runs log it (`names`: the figures they log), else val_loss."""
    return PREFERRED if PREFERRED in set(names) else FALLBACK


def objective_name(requested: str | None, names: Iterable[str]) -> str:
    """The objective: as asked, else the default for the figures logged (`names`)."""
    return requested or default_objective(names)


def minimised(objective: str) -> bool:
    """Whether lower is better: a loss or an error."""
    return any(word in objective for word in LOWER_IS_BETTER)


def direction(objective: str) -> str:
    """The best as `report` names it: "lowest" for a minimised objective, else "highest"."""
    return "lowest" if minimised(objective) else "highest"
