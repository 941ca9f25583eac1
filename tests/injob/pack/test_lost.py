"""The nodes of a packed allocation that were lost: srun's word, the job's NodeList, sinfo's states."""

from __future__ import annotations

import pytest

from hpc_train.injob.pack.lost import failed_node, lost_nodes
from hpc_train.slurm.client import SlurmClient


def test_srun_says_which_node_failed() -> None:
    assert failed_node("srun: error: Node failure on node2\n") == "node2"
    assert failed_node("srun: error: node2: task 1: Killed") is None


def test_a_node_is_lost_when_srun_said_so_the_job_dropped_it_or_sinfo_says_it_is_down(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(SlurmClient, "show_job", lambda self, job_id, timeout=30: {"NodeList": "n[1-2],n4"})
    monkeypatch.setattr(SlurmClient, "node_states", lambda self, partition=None: {
        "n1": "alloc", "n2": "down*", "n3": "alloc", "n4": "mix", "n9": "down"})
    ours = {"n1", "n2", "n3", "n4"}
    # n3 left the job's NodeList, n2 is down, srun said n4 failed; n9 is down but not ours.
    assert lost_nodes({"SLURM_JOB_ID": "7"}, ours, said=["n4"]) == {"n2", "n3", "n4"}
    monkeypatch.setattr(SlurmClient, "show_job", lambda self, job_id, timeout=30: {})  # Slurm did not answer
    assert lost_nodes({"SLURM_JOB_ID": "7"}, ours) == {"n2"}
