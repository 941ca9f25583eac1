"""Start, check and stop a local cluster's daemons. Idempotent: `up` twice is fine.

`down` stops exactly the daemons whose pid files `up` wrote, and removes the
/etc/hosts line it added; nothing of a system Slurm is touched.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import stat
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from hpc_train.errors import HpcTrainError
from hpc_train.slurm.client import SlurmClient
from hpc_train.localslurm import accounting, daemons, netns, ports
from hpc_train.localslurm.daemons import running_pid, slurm_env
from hpc_train.localslurm.netns import HOSTS_FILE
from hpc_train.localslurm.spec import (ACCOUNTING_DAEMONS, FAKE_GPU_DEVICE, HOSTS_MARK, LocalCluster, hosts_line,
                                       render_gres_conf, render_site_script, render_slurm_conf)

def up(cluster: LocalCluster, timeout: float = 90.0) -> None:
    """Install what is missing, write the configuration, start what is not running, wait for idle nodes."""
    _require_root()
    daemons.install_missing()
    if cluster.site_firewall:  # as `up` installs Slurm: so that anyone can try the site kit
        daemons.install_missing(("nft",), ("nftables",), "nftables (nft)")
    if cluster.separate_hosts:
        netns.refuse_conflicts(cluster.network, f"{HOSTS_MARK} {cluster.directory}")
    _restart_if_reconfigured(cluster)
    ports.refuse_taken(cluster, {daemon for daemon in cluster.daemons if running_pid(cluster, daemon) is None})
    _write_files(cluster)
    if cluster.separate_hosts:
        netns.ensure(cluster.network, cluster.directory)
    _ensure_hosts(cluster)
    _start("munged", cluster, _munged_command)
    if cluster.accounting:  # slurmctld reports to slurmdbd from its start: the database comes first
        accounting.start(cluster)
    _start("slurmctld", cluster, lambda c: ["slurmctld", "-f", str(c.conf)])
    for name in cluster.node_names:
        _start(f"slurmd-{name}", cluster, lambda c, n=name: _on_node(c, n, ["slurmd", "-f", str(c.conf), "-N", n]))
    _wait_for_idle_nodes(cluster, timeout)
    daemons.say(f"up: {len(cluster.node_names)} nodes {cluster.nodes}, partition {cluster.partition}; "
        f"use it with: export SLURM_CONF={cluster.conf}")


def placed(cluster: LocalCluster) -> LocalCluster:
    """The cluster at the port it runs on now (its slurm.conf's), or else at the first free one from its own:
    for `up` without --port, so that a taken default moves the cluster instead of failing it."""
    port = ports.recorded_port(cluster.directory)
    if port is not None and _running_slurm_daemons(cluster.directory):
        return replace(cluster, controller_port=port)
    return ports.first_free(cluster)


def as_recorded(cluster: LocalCluster) -> LocalCluster:
    """The cluster at the port `up` last wrote in its directory (for `down` and `status` without --port)."""
    port = ports.recorded_port(cluster.directory)
    return cluster if port is None else replace(cluster, controller_port=port)


def down(cluster: LocalCluster) -> None:
    """Cancel its jobs, stop the daemons `up` started (slurmd first), and remove the hosts line."""
    _cancel_every_job(cluster)  # a job's processes outlive slurmd, and slurmctld would restore it on the next up
    others = {daemon: pid for daemon, pid in _running_slurm_daemons(cluster.directory).items()
              if daemon not in cluster.daemons}  # nodes of an earlier `up` with other --nodes
    _stop_all(cluster, others)
    # Those of an `up --accounting` too, whether or not `down` was told --accounting.
    extra = tuple(daemon for daemon in reversed(ACCOUNTING_DAEMONS) if daemon not in cluster.daemons)
    for daemon in (*reversed(cluster.daemons), *extra):
        pid = running_pid(cluster, daemon)
        if pid is not None:
            daemons.stop(pid, daemon)
        cluster.pid_file(daemon).unlink(missing_ok=True)
    _remove_hosts(cluster)
    if cluster.separate_hosts or netns.recorded(cluster.directory):
        netns.remove(cluster.network, cluster.directory)
    daemons.say(f"down: stopped the cluster in {cluster.directory}")


def _cancel_every_job(cluster: LocalCluster, timeout: float = 20.0) -> None:
    if running_pid(cluster, "slurmctld") is None:
        return
    slurm = SlurmClient.local(slurm_env(cluster))

    def queued() -> list[str]:  # a slurmctld that hangs answers nothing: `down` goes on to stop it
        return slurm.queued_job_ids()

    jobs = queued()
    if not jobs:
        return
    slurm.cancel(jobs)
    if daemons.wait_until(lambda: not queued(), timeout):
        daemons.say(f"cancelled {len(jobs)} job(s)")
    else:
        daemons.say(f"warning: cancelled {len(jobs)} job(s), but some were still ending after {timeout:.0f} s")


def configuration_changes(written: dict[str, str | None], wanted: dict[str, str]) -> list[str]:
    """The configuration files whose wanted text differs from what is written (None: not written)."""
    return [name for name, text in wanted.items() if written.get(name) is not None and written[name] != text]


def _restart_if_reconfigured(cluster: LocalCluster) -> None:
    """Other options than the running daemons were started with: stop the Slurm daemons (and separate hosts made
    for them) so that `up` starts them again from the new files. munged and its key stay."""
    # (A changed job_submit.lua needs no restart: Slurm's lua plugin reads it again at the next submit or update.)
    wanted = {cluster.conf.name: render_slurm_conf(cluster), cluster.gres_conf.name: render_gres_conf(cluster)}
    written = {name: (cluster.directory / name).read_text() if (cluster.directory / name).exists() else None
               for name in wanted}
    running = _running_slurm_daemons(cluster.directory)
    changed = configuration_changes(written, wanted)
    if not (changed and running):
        return
    daemons.say(f"the cluster in {cluster.directory} runs with other options ({', '.join(changed)} changed): restarting "
        "slurmctld and the slurmd daemons; jobs still running there may be lost")
    _stop_all(cluster, running)
    if netns.recorded(cluster.directory):  # made for the old nodes; `up` makes what the new ones need
        netns.remove(cluster.network, cluster.directory)


def _stop_all(cluster: LocalCluster, running: dict[str, int]) -> None:
    """Stop these daemons (name -> pid), every slurmd before slurmctld, and forget their pid files."""
    for daemon, pid in sorted(running.items(), key=lambda item: item[0] == "slurmctld"):
        daemons.stop(pid, daemon)
        cluster.pid_file(daemon).unlink(missing_ok=True)


def _running_slurm_daemons(directory: Path) -> dict[str, int]:
    """slurmctld and every slurmd (whatever its node's name) started for the cluster in `directory`."""
    running = {}
    for pid_file in (directory / "run").glob("slurm*.pid"):
        try:
            pid = int(pid_file.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
        daemon = pid_file.stem  # slurmdbd (accounting) is not one of them: it keeps running across a restart
        if (daemon == "slurmctld" or daemon.startswith("slurmd-")) and daemons.alive(pid) and daemons.is_daemon(pid, daemon):
            running[daemon] = pid
    return running


def status(cluster: LocalCluster) -> dict[str, int | None]:
    """Each daemon's pid, or None when it is not running."""
    return {daemon: running_pid(cluster, daemon) for daemon in cluster.daemons}


def _require_root() -> None:
    if os.geteuid() != 0:
        raise HpcTrainError("a local Slurm cluster needs root (its slurmd daemons run jobs as their users); "
                            "run it as root (e.g. sudo hpc-train cluster up), or use hpc-train launch without Slurm")


def _write_files(cluster: LocalCluster) -> None:
    for sub in ("state", "run", "log", *(f"spool/{name}" for name in cluster.node_names)):
        (cluster.directory / sub).mkdir(parents=True, exist_ok=True)
    cluster.conf.write_text(render_slurm_conf(cluster))
    cluster.gres_conf.write_text(render_gres_conf(cluster))
    if cluster.job_submit_lua:
        cluster.lua_conf.write_text(cluster.job_submit_lua.read_text())
    for when in ("prolog", "epilog") if cluster.site_firewall else ():
        cluster.site_script(when).write_text(render_site_script(cluster, when, sys.executable))
        cluster.site_script(when).chmod(0o755)
    _make_fake_gpus(cluster)
    # munged runs as the munge user: its directory and key must be its own, the key private.
    cluster.directory.chmod(0o755)
    cluster.munge_dir.mkdir(exist_ok=True)
    cluster.munge_dir.chmod(0o755)  # clients reach the socket through it; the key itself is 0400
    if not cluster.munge_key.exists():
        cluster.munge_key.write_bytes(os.urandom(1024))
    cluster.munge_key.chmod(0o400)
    shutil.chown(cluster.munge_dir, "munge", "munge")
    shutil.chown(cluster.munge_key, "munge", "munge")


def _munged_command(cluster: LocalCluster) -> list[str]:
    m = cluster.munge_dir
    return ["runuser", "-u", "munge", "--", "munged", f"--key-file={cluster.munge_key}",
            f"--socket={cluster.munge_socket}", f"--pid-file={m / 'munged.pid'}", f"--log-file={m / 'munged.log'}",
            f"--seed-file={m / 'munged.seed'}"]


def _start(daemon: str, cluster: LocalCluster, command: Callable[[LocalCluster], list[str]]) -> None:
    if running_pid(cluster, daemon) is not None:
        return
    result = daemons.run(command(cluster), slurm_env(cluster))
    if result.returncode != 0:
        detail = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise HpcTrainError(f"{daemon} did not start ({detail}); see {cluster.log_file(daemon.split('-')[0])}")
    if daemon == "munged":  # munged writes its pid file where only munge may look; we keep our own copy
        daemons.wait_until(lambda: (cluster.munge_dir / "munged.pid").exists(), 10)
        cluster.pid_file(daemon).write_text((cluster.munge_dir / "munged.pid").read_text())
    elif daemon.startswith("slurmd-"):
        daemons.wait_until(lambda: (cluster.directory / "run" / f"{daemon}.pid").exists(), 10)
    daemons.say(f"started {daemon}")


def _wait_for_idle_nodes(cluster: LocalCluster, timeout: float) -> None:
    slurm = SlurmClient.local(slurm_env(cluster))

    def nodes_ready() -> bool:
        states = slurm.node_states()
        for name, state in states.items():
            if state.rstrip("*") in ("down", "drain", "drng", "fail"):
                slurm.update_node(name, State="RESUME")
        return len(states) == len(cluster.node_names) and all(
            state.rstrip("*") in ("idle", "mix", "alloc") for state in states.values())

    if not daemons.wait_until(nodes_ready, timeout):
        raise HpcTrainError(f"the nodes did not become idle within {timeout:.0f} s; see the logs in "
                            f"{cluster.directory / 'log'} (sinfo with SLURM_CONF={cluster.conf})")


def _ensure_hosts(cluster: LocalCluster) -> None:
    """Make the node names resolve, with a marked line that `down` removes."""
    line = hosts_line(cluster)  # with separate hosts, one line per node
    mark = f"{HOSTS_MARK} {cluster.directory}"

    def with_line(lines: list[str]) -> list[str]:
        if [existing for existing in lines if existing.endswith(mark)] == line.splitlines():
            return lines  # there already, where it was
        return [*(existing for existing in lines if not existing.endswith(mark)), *line.splitlines()]

    _change_hosts(with_line)


def _remove_hosts(cluster: LocalCluster) -> None:
    if HOSTS_FILE.exists():
        mark = f"{HOSTS_MARK} {cluster.directory}"
        _change_hosts(lambda lines: [line for line in lines if not line.endswith(mark)])


def _change_hosts(change: Callable[[list[str]], list[str]]) -> None:
    """Change /etc/hosts under a lock on it (another cluster's `up` or `down` may run at once), in place (it is often
    a bind mount, which cannot be replaced), writing only from the first byte that changes: the lines before it,
    an older cluster's among them, stay whole for whatever resolves a name meanwhile (that cluster's jobs)."""
    with HOSTS_FILE.open("r+b") as hosts:
        fcntl.flock(hosts, fcntl.LOCK_EX)
        old = hosts.read()
        new = "".join(f"{line}\n" for line in change(old.decode().splitlines())).encode()
        if new == old:
            return
        same = len(os.path.commonprefix([old, new]))
        hosts.seek(same)
        hosts.write(new[same:])
        hosts.truncate(len(new))


def _make_fake_gpus(cluster: LocalCluster) -> None:
    """The GPUs' device files: character devices like /dev/null, which is all Slurm checks."""
    for device in cluster.gpu_devices:
        device.parent.mkdir(exist_ok=True)
        if device.exists() and not stat.S_ISCHR(device.stat().st_mode):
            device.unlink()
        if not device.exists():
            os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(*FAKE_GPU_DEVICE))


def _on_node(cluster: LocalCluster, node: str, command: list[str]) -> list[str]:
    """A node's command: in the node's own network namespace when the cluster has separate hosts."""
    return netns.enter_command(cluster.network.host(node), command) if cluster.separate_hosts else command
