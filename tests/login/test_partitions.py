"""Reading the cluster's partitions through a Slurm client: one line when Slurm does not answer."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpc_train.errors import HpcTrainError
from hpc_train.login.partitions import Partition, read_partitions
from tests.fake_slurm import FakeSlurm, Reply

PARTITIONS = "PartitionName=gpu Nodes=g[1-2] TotalNodes=2 MaxNodes=1 MaxTime=01:00:00\n"
NODES = "NodeName=g1 Gres=gpu:4\nNodeName=g2 Gres=gpu:2\n"


def test_partitions_are_read_with_two_scontrol_calls(tmp_path: Path) -> None:
    fake = FakeSlurm(tmp_path, {"scontrol show partition": PARTITIONS, "scontrol show node": NODES})
    assert read_partitions(fake.client({})) == [Partition("gpu", 2, 1, 60, (4, 2))]
    assert fake.lines() == ["scontrol show partition -o", "scontrol show node -o"]


def test_a_controller_that_does_not_answer_is_one_line_naming_slurm_conf(tmp_path: Path) -> None:
    conf = tmp_path / "slurm.conf"
    conf.write_text("")
    fake = FakeSlurm(tmp_path / "fake", {"scontrol": Reply(stderr="slurm_load_partitions: Unable to contact "
                                                                  "slurm controller (connect failure)\n", code=1)})
    with pytest.raises(HpcTrainError, match=rf"^Slurm does not answer with SLURM_CONF={conf} \(slurm_load_partitions: "
                                            r"Unable to contact slurm controller \(connect failure\)\); point"):
        read_partitions(fake.client({"SLURM_CONF": str(conf)}))


def test_a_slurm_conf_that_is_no_file_is_refused_before_asking_slurm(tmp_path: Path) -> None:
    fake = FakeSlurm(tmp_path, {"scontrol": ""})
    with pytest.raises(HpcTrainError, match="SLURM_CONF='/no/such.conf' is not a file"):
        read_partitions(fake.client({"SLURM_CONF": "/no/such.conf"}))
    assert fake.calls() == []
