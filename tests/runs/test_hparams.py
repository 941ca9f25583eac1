"""A sweep element's values for TensorBoard's HParams view: which settings, and written into tensorboard/."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from hpc_train.config import TrainConfig
from hpc_train.runs.hparams import swept_values, tensorboard_dir, write_hparams


def test_the_values_are_the_settings_the_sweep_varies_as_the_run_has_them() -> None:
    config = TrainConfig(learning_rate=0.003, batch_size=128, optimizer="sgd", tune_malloc=False)
    environ = {"HPC_TRAIN_SWEEP_LEARNING_RATE": "3e-3", "HPC_TRAIN_SWEEP_BATCH_SIZE": "128",
               "HPC_TRAIN_SWEEP_OPTIMIZER": "sgd", "HPC_TRAIN_SWEEP_TUNE_MALLOC": "false",
               "HPC_TRAIN_SWEEP_NO_SUCH_SETTING": "1", "HPC_TRAIN_TRIAL": "4", "LEARNING_RATE": "9"}
    assert swept_values(config, environ) == {"batch_size": 128, "learning_rate": 0.003, "optimizer": "sgd",
                                             "tune_malloc": False}


def test_only_single_values_are_kept_and_a_run_outside_a_sweep_has_none() -> None:
    assert swept_values(TrainConfig(), {"HPC_TRAIN_SWEEP_STEPS_PER_EPOCH": ""}) == {}  # None: no HParams value
    assert swept_values(TrainConfig(), {"PATH": "/bin"}) == {}


def test_a_run_outside_a_sweep_writes_nothing_and_imports_no_tensorflow(tmp_path: Path) -> None:
    had_tensorflow = "tensorflow" in sys.modules
    assert write_hparams(tmp_path, TrainConfig(), {}) is False
    assert list(tmp_path.iterdir()) == [] and ("tensorflow" in sys.modules) == had_tensorflow


@pytest.mark.tensorflow
def test_an_element_writes_its_values_and_trial_for_the_hparams_view(tmp_path: Path) -> None:
    import hpc_train.training.keras  # noqa: F401  (TensorFlow configured as the trainer has it)
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData

    environ = {"HPC_TRAIN_SWEEP_LEARNING_RATE": "0.01", "HPC_TRAIN_TRIAL": "3"}
    assert write_hparams(tmp_path, TrainConfig(learning_rate=0.01), environ) is True
    events = EventAccumulator(str(tensorboard_dir(tmp_path)), size_guidance={"tensors": 0})
    events.Reload()
    [content] = events.PluginTagToContent("hparams").values()
    session = HParamsPluginData.FromString(content).session_start_info
    assert session.group_name == "3" and session.hparams["learning_rate"].number_value == pytest.approx(0.01)
    assert tensorboard_dir(tmp_path) == tmp_path / "tensorboard"
