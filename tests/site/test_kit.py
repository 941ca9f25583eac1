"""The site firewall as slurmd runs it: `hpc-train site firewall --prolog/--epilog` with a job's environment.

With root and nft: in a network namespace of the test's own (`unshare --net`), so the machine's tables are
never touched. A node without nft, and a job whose node does not resolve: one line, exit 0, no table.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fake_slurm import without_slurm

NFT = shutil.which("nft", path="/usr/sbin:/usr/bin:/sbin:/bin")
needs_nft = pytest.mark.skipif(os.geteuid() != 0 or NFT is None or shutil.which("unshare") is None,
                               reason="needs root, nft (nftables) and unshare")
SITE = f"{sys.executable} -m hpc_train site firewall"


def job_env(tmp_path: Path, job_id: str = "1234", nodes: str = "localhost", shown: str = "NumTasks=2 NumNodes=1",
            **extra: str) -> dict[str, str]:
    """What slurmd gives its Prolog and Epilog, and fake squeue and scontrol on PATH (this node runs job 50;
    `shown`: what scontrol show job says of job 1234)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "squeue").write_text("#!/bin/sh\necho 50\n")
    (bin_dir / "scontrol").write_text(f"#!/bin/sh\necho 'JobId=1234 {shown}'\n")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    return {**without_slurm(), "SLURM_JOB_ID": job_id, "SLURM_JOB_NODELIST": nodes, "SLURMD_NODENAME": "localhost",
            "PATH": f"{bin_dir}:/usr/sbin:/usr/bin:/sbin:/bin", **extra}


def in_own_network(script: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["unshare", "--net", "sh", "-ec", script], env=env, capture_output=True, text=True,
                          timeout=120, cwd=Path(__file__).resolve().parents[2])


@needs_nft
def test_the_prolog_guards_the_window_and_the_epilog_removes_it(tmp_path: Path) -> None:
    result = in_own_network(f"""
        {SITE} --prolog --log {tmp_path}/site.log
        nft list table inet hpc_train_job_1234
        echo ---
        {SITE} --epilog --log {tmp_path}/site.log
        nft list tables
        echo ---""", job_env(tmp_path))
    assert result.returncode == 0, result.stderr
    during, after, _ = result.stdout.split("---\n")
    assert "tcp dport 26256-26263 ip saddr 127.0.0.1 accept" in during  # localhost: the job's one node
    assert "tcp dport 26256-26263 drop" in during and "hook input priority filter - 10" in during
    assert after == ""
    assert (tmp_path / "site.log").read_text().splitlines() == [
        "hpc-train site firewall: job 1234 on localhost: ports 26256-26263 open to localhost only "
        "(table inet hpc_train_job_1234)",
        "hpc-train site firewall: job 1234 on localhost: removed table inet hpc_train_job_1234"]


@needs_nft
def test_a_job_with_a_data_service_gets_the_grown_window_its_comment_says(tmp_path: Path) -> None:
    """8 ranks and a data service of 3 ports (the rendered script's comment): the window of 16 the ranks use."""
    result = in_own_network(f"{SITE} --prolog\nnft list table inet hpc_train_job_1234", job_env(
        tmp_path, shown="NumTasks=8 NumNodes=1 Comment=hpc-train-service-ports=3 Partition=debug"))
    assert result.returncode == 0, result.stderr
    assert "tcp dport 19744-19759 drop" in result.stdout, result.stdout  # 16384 + (1234 mod 1024) * 16


@needs_nft
def test_the_prolog_sweeps_our_stale_tables_and_never_touches_others(tmp_path: Path) -> None:
    # Job 40's epilog never ran; job 50 still runs here (squeue says so); the other tables are not ours.
    result = in_own_network(f"""
        nft add table inet hpc_train_job_40
        nft add table inet hpc_train_job_50
        nft add table ip hpc_train_job_41
        nft add table inet hpc_train_job_42x
        nft add table inet site_rules
        {SITE} --prolog
        nft list tables""", job_env(tmp_path))
    assert result.returncode == 0, result.stderr
    assert sorted(result.stdout.splitlines()) == [
        "table inet hpc_train_job_1234", "table inet hpc_train_job_42x", "table inet hpc_train_job_50",
        "table inet site_rules", "table ip hpc_train_job_41"]
    assert "swept table inet hpc_train_job_40 (job 40 no longer here)" in result.stderr


@needs_nft
def test_a_requeued_job_replaces_its_own_table(tmp_path: Path) -> None:
    result = in_own_network(f"{SITE} --prolog\n{SITE} --prolog\nnft list tables", job_env(tmp_path))
    assert result.returncode == 0 and result.stdout == "table inet hpc_train_job_1234\n", result.stderr


@needs_nft
def test_a_node_that_does_not_resolve_leaves_the_job_open(tmp_path: Path) -> None:
    result = in_own_network(f"{SITE} --prolog\nnft list tables",
                            job_env(tmp_path, nodes="localhost,no-such-node.invalid"))
    assert result.returncode == 0 and result.stdout == ""
    assert re.fullmatch(r"hpc-train site firewall: job 1234 on localhost: node no-such-node.invalid does not "
                        r"resolve \([^)]+\); the job's ports stay open to every host\n", result.stderr), result.stderr


def test_without_nft_one_line_and_exit_0(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    for flag in ("--prolog", "--epilog"):
        result = subprocess.run([sys.executable, "-m", "hpc_train", "site", "firewall", flag],
                                env={**job_env(tmp_path), "PATH": str(empty)}, capture_output=True, text=True,
                                timeout=60)
        assert result.returncode == 0
        assert result.stderr.splitlines() == [
            "hpc-train site firewall: job 1234 on localhost: no nft here (install nftables): the job's ports stay "
            "open to every host"]


def test_a_hostile_job_id_is_refused_in_one_line_and_exit_0(tmp_path: Path) -> None:
    result = subprocess.run(f"{SITE} --prolog", shell=True, capture_output=True, text=True, timeout=60,
                            env=job_env(tmp_path, job_id="1; touch pwned"), cwd=tmp_path)
    assert result.returncode == 0 and not (tmp_path / "pwned").exists()
    assert len(result.stderr.splitlines()) == 1 and "not a job id" in result.stderr


@needs_nft
def test_when_slurm_does_not_answer_no_table_is_swept(tmp_path: Path) -> None:
    env = job_env(tmp_path)
    (tmp_path / "bin" / "squeue").write_text("#!/bin/sh\necho 'squeue: error: Unable to contact slurm controller' >&2\n"
                                             "exit 1\n")
    result = in_own_network(f"nft add table inet hpc_train_job_40\n{SITE} --prolog\nnft list tables", env)
    assert result.returncode == 0, result.stderr
    assert sorted(result.stdout.splitlines()) == ["table inet hpc_train_job_1234", "table inet hpc_train_job_40"]
    assert "job 1234 on localhost: Slurm did not say which jobs run here: no table swept" in result.stderr


def het_component_env(tmp_path: Path) -> dict[str, str]:
    """The captured prolog of a heterogeneous job's data-service component (tests/site/slurm_22_05_het: 7301014 on
    hf3, its leader 7301013 on hf[1-2]), its nodes named by addresses that resolve here; a fake scontrol answers as
    Slurm did: the leader's id lists both components, the component's own id itself alone."""
    captured = Path(__file__).parent / "slurm_22_05_het"
    here = {"hf[1-2]": "127.0.0.[2-3]", "hf3": "127.0.0.4"}

    def resolvable(text: str) -> str:
        for name, address in here.items():
            text = text.replace(name, address)
        return text

    env = job_env(tmp_path)
    both = resolvable((captured / "service.scontrol").read_text())
    (tmp_path / "both.txt").write_text(both)
    (tmp_path / "own.txt").write_text(both.splitlines()[1] + "\n")
    (tmp_path / "bin" / "scontrol").write_text(
        f'#!/bin/sh\ncase "$4" in 7301013) cat {tmp_path}/both.txt;; 7301014) cat {tmp_path}/own.txt;; esac\n')
    prolog = dict(line.split("=", 1) for line in (captured / "service.component1.hf3.env").read_text().splitlines())
    return {**{name: value for name, value in env.items() if not name.startswith("SLURM")},
            **{name: resolvable(value) for name, value in prolog.items() if name.startswith("SLURM")},
            "SLURMD_NODENAME": "127.0.0.4"}


@needs_nft
def test_a_heterogeneous_jobs_component_opens_the_whole_jobs_window_to_every_components_nodes(
        tmp_path: Path) -> None:
    result = in_own_network(f"{SITE} --prolog --log {tmp_path}/site.log\nnft list table inet hpc_train_job_7301014",
                            het_component_env(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "tcp dport 31912-31919 ip saddr { 127.0.0.2, 127.0.0.3, 127.0.0.4 } accept" in result.stdout, result.stdout
    assert "tcp dport 31912-31919 drop" in result.stdout
    assert (tmp_path / "site.log").read_text() == (
        "hpc-train site firewall: job 7301014 on 127.0.0.4: ports 31912-31919 of heterogeneous job 7301013 open to "
        "127.0.0.2, 127.0.0.3, 127.0.0.4 only (table inet hpc_train_job_7301014)\n")


def test_a_component_slurm_does_not_list_with_its_job_leaves_the_job_open_in_one_line(tmp_path: Path) -> None:
    env = het_component_env(tmp_path)
    (tmp_path / "both.txt").write_text((tmp_path / "own.txt").read_text())  # the leader's id: this component alone
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "nft").symlink_to(shutil.which("true") or "/bin/true")  # reached only once the job's facts are known
    result = subprocess.run([sys.executable, "-m", "hpc_train", "site", "firewall", "--prolog"],
                            env={**env, "PATH": f"{tmp_path / 'bin'}:{empty}:/usr/bin:/bin"}, capture_output=True,
                            text=True, timeout=60, cwd=Path(__file__).resolve().parents[2])
    assert result.returncode == 0
    assert result.stderr.splitlines() == [
        "hpc-train site firewall: job 7301014 on 127.0.0.4: Slurm did not list the components of heterogeneous job "
        "7301013 (scontrol show job 7301013), and this component's nodes alone would cut the job apart; the job's "
        "ports stay open to every host"]
