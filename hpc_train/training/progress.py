"""Where a run is, in steps, and what is left to train (pure; no TensorFlow).

A run's position is one number, the global step: optimizer steps done so far,
restored with the optimizer from a checkpoint. Epochs are `steps_per_epoch`
steps each, so a checkpoint written mid-epoch resumes in the middle of that
epoch: its remaining steps first, then whole epochs. Each stretch is one call
to `model.fit`, because Keras cannot start an epoch part-way through.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hpc_train.config import ConfigError, replace


@dataclass(frozen=True)
class Progress:
    """`global_step` steps done, in epochs of `steps_per_epoch` steps."""

    global_step: int
    steps_per_epoch: int

    def __post_init__(self) -> None:
        if self.global_step < 0 or self.steps_per_epoch < 1:
            raise ValueError(f"no such progress: {self}")

    @property
    def epochs_done(self) -> int:
        return self.global_step // self.steps_per_epoch

    @property
    def step_in_epoch(self) -> int:
        """Steps done in the epoch under way (0 at an epoch boundary)."""
        return self.global_step % self.steps_per_epoch

    def position(self) -> dict[str, int]:
        """Where the run is, as state.json records it."""
        return {"global_step": self.global_step, "epochs_done": self.epochs_done,
                "step_in_epoch": self.step_in_epoch, "steps_per_epoch": self.steps_per_epoch}

    def describe(self) -> str:
        if self.step_in_epoch == 0:
            return f"after epoch {self.epochs_done} (step {self.global_step})"
        return (f"in epoch {self.epochs_done + 1} after step {self.step_in_epoch} of {self.steps_per_epoch} "
                f"(step {self.global_step})")


@dataclass(frozen=True)
class Stretch:
    """One `model.fit` call: epochs `first_epoch`..`end_epoch - 1` (0-based), `steps` steps each,
    starting at global step `start_step` (which also fixes where the input data resumes)."""

    first_epoch: int
    end_epoch: int
    steps: int
    start_step: int


def remaining_stretches(progress: Progress, epochs: int) -> list[Stretch]:
    """What is left of `epochs` epochs: the rest of a part-done epoch, then the whole epochs after it."""
    stretches = []
    epoch, step = progress.epochs_done, progress.step_in_epoch
    if step and epoch < epochs:
        stretches.append(Stretch(epoch, epoch + 1, progress.steps_per_epoch - step, progress.global_step))
        epoch += 1
    if epoch < epochs:
        stretches.append(Stretch(epoch, epochs, progress.steps_per_epoch, epoch * progress.steps_per_epoch))
    return stretches


def data_position(batches_done: int, batches_per_pass: int) -> tuple[int, int]:
    """(pass, batch within it) after `batches_done` batches of a stream made of passes of equal length."""
    if batches_per_pass < 1:
        raise ValueError(f"a pass needs at least one batch, got {batches_per_pass}")
    return divmod(batches_done, batches_per_pass)


def replica_batch(config: Any, replicas: int) -> Any:
    """The config with `batch_size` each replica's share of its `global_batch` (a node range's, fixed at submit, so
    that every size trains the same: its global batch, steps per epoch and learning-rate schedule); the config as it
    is without one. One line when `replicas` cannot share it evenly."""
    if not config.global_batch:
        return config
    if config.global_batch % replicas:
        raise ConfigError(f"global_batch {config.global_batch} cannot be shared by {replicas} replicas; set it to a "
                          f"multiple of {replicas} (and of every size's replicas, for a node range)")
    return replace(config, batch_size=config.global_batch // replicas)
