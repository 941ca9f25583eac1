"""/etc/hosts as `cluster up` and `down` change it: several clusters' lines side by side, never one lost when two
change it at once, and never a line before the change rewritten while another cluster's jobs resolve names."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from hpc_train.localslurm import control
from hpc_train.localslurm.spec import HOSTS_MARK, LocalCluster

SYSTEM = "127.0.0.1 localhost\n::1 localhost ip6-localhost\n"


@pytest.fixture
def hosts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "hosts"
    path.write_text(SYSTEM)
    monkeypatch.setattr(control, "HOSTS_FILE", path)
    return path


def cluster(tmp_path: Path, name: str) -> LocalCluster:
    return LocalCluster(tmp_path / name, nodes=f"{name}[1-2]", cpus=1)


def test_up_adds_its_line_after_the_others_and_down_removes_only_its_own(hosts: Path, tmp_path: Path) -> None:
    first, second = cluster(tmp_path, "first"), cluster(tmp_path, "second")
    control._ensure_hosts(first)
    control._ensure_hosts(second)
    control._ensure_hosts(first)  # again: nothing changes
    lines = hosts.read_text().splitlines()
    assert lines[:2] == SYSTEM.splitlines() and len(lines) == 4
    assert lines[2].endswith(f"{HOSTS_MARK} {first.directory}") and "first1" in lines[2]
    assert lines[3].endswith(f"{HOSTS_MARK} {second.directory}") and "second2" in lines[3]
    control._remove_hosts(first)
    assert hosts.read_text() == SYSTEM + lines[3] + "\n"
    control._remove_hosts(second)
    assert hosts.read_text() == SYSTEM


def test_a_change_writes_from_its_first_changed_byte_on(hosts: Path, tmp_path: Path) -> None:
    # The file stays the same inode (a bind-mounted /etc/hosts cannot be replaced) and the lines before the change
    # are never written: a resolver reading them meanwhile sees them whole.
    first, second = cluster(tmp_path, "first"), cluster(tmp_path, "second")
    control._ensure_hosts(first)
    inode = hosts.stat().st_ino
    before = hosts.read_bytes()
    hosts.chmod(0o644)
    control._ensure_hosts(second)
    assert hosts.read_bytes().startswith(before) and hosts.stat().st_ino == inode
    control._remove_hosts(second)
    assert hosts.read_bytes() == before and hosts.stat().st_ino == inode


def _up_and_down(directory: str, hosts_file: str, rounds: int) -> None:
    control.HOSTS_FILE = Path(hosts_file)
    own = LocalCluster(Path(directory), nodes="n[1-2]", cpus=1)
    for _ in range(rounds):
        control._ensure_hosts(own)
        control._remove_hosts(own)
    control._ensure_hosts(own)


def test_clusters_brought_up_and_down_at_once_lose_no_line(hosts: Path, tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_up_and_down, args=(str(tmp_path / f"c{index}"), str(hosts), 50))
               for index in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0
    lines = hosts.read_text().splitlines()
    assert lines[:2] == SYSTEM.splitlines()
    assert sorted(line.split(HOSTS_MARK)[1].strip() for line in lines[2:]) == [
        str(tmp_path / f"c{index}") for index in range(4)]
