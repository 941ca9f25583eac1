"""Node-list expansion against Slurm's own `scontrol show hostnames`, where scontrol exists."""

from __future__ import annotations

import os
import shutil
import subprocess

import hostlist
import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from hpc_train.bootstrap.nodelist import expand_nodelist

pytestmark = [
    pytest.mark.slurm,
    pytest.mark.skipif(shutil.which("scontrol") is None, reason="scontrol not on PATH (install slurm-client)"),
]


@pytest.fixture(scope="module")
def scontrol_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    # scontrol needs a slurm.conf even to parse a host list; this one names no daemon it will call.
    conf = tmp_path_factory.mktemp("slurm") / "slurm.conf"
    conf.write_text("ClusterName=hpctraintest\nSlurmctldHost=localhost\n")
    return {**os.environ, "SLURM_CONF": str(conf)}


def scontrol_hostnames(nodelist: str, env: dict[str, str]) -> list[str]:
    result = subprocess.run(["scontrol", "show", "hostnames", nodelist], env=env, capture_output=True,
                            text=True, timeout=30, check=True)
    return result.stdout.split()


@pytest.mark.parametrize("nodelist", [
    "node[9-10]", "gpu[001-004]", "a[1-2],b[5,7-8]", "node10,node9", "node[098-102]",
    "rack1-node[1-3],rack2-node[1-2]", "solo",
])
def test_expansion_matches_scontrol(nodelist: str, scontrol_env: dict[str, str]) -> None:
    assert list(expand_nodelist("SLURM_STEP_NODELIST", nodelist)) == scontrol_hostnames(nodelist, scontrol_env)


@st.composite
def nodelists(draw: st.DrawFn) -> str:
    """Comma-joined parts such as `gpu[007-012,020]` with distinct names."""
    parts = []
    for prefix in draw(st.lists(st.sampled_from(["node", "gpu", "c", "r1n"]), min_size=1, max_size=3, unique=True)):
        width = draw(st.integers(1, 3))
        numbers = sorted(draw(st.sets(st.integers(0, 10 ** width - 1), min_size=1, max_size=12)))
        names = [f"{prefix}{number:0{width}d}" for number in numbers]
        parts.append(hostlist.collect_hostlist(names) if draw(st.booleans()) else ",".join(names))
    return ",".join(parts)


@hypothesis_settings(max_examples=40)
@given(nodelist=nodelists())
def test_random_lists_match_scontrol(nodelist: str, scontrol_env: dict[str, str]) -> None:
    assert list(expand_nodelist("SLURM_STEP_NODELIST", nodelist)) == scontrol_hostnames(nodelist, scontrol_env)


def test_slurm_accepts_a_broken_list_that_we_refuse(scontrol_env: dict[str, str]) -> None:
    """scontrol turns 'node[1-' into a node named 'node]'; we stop with an error instead."""
    assert scontrol_hostnames("node[1-", scontrol_env) == ["node]"]
    from hpc_train.errors import SlurmEnvError

    with pytest.raises(SlurmEnvError, match="unbalanced brackets"):
        expand_nodelist("SLURM_STEP_NODELIST", "node[1-")
