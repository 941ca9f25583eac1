"""The site firewall's edge, run by slurmd as Prolog and Epilog on every node of a job (as root).

A prolog's non-zero exit drains the node and requeues the job; so the kit
always exits 0: whatever stops it (no nft here, a node name that does not
resolve, nft refusing) is one log line and the job runs with its ports open,
as it would without the kit. Log lines go to stderr (slurmd's log at its
debug level), to syslog when there is one, and to `--log FILE` when given.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import syslog
from collections.abc import Callable, Mapping
from pathlib import Path

from hpc_train.errors import HpcTrainError
from hpc_train.site.firewall import FAMILY, JobOnNode, guarded, our_tables, ruleset, stale_tables, table_name
from hpc_train.slurm.client import SlurmClient

TAG = "hpc-train site firewall"
# slurmd runs a prolog with few variables, PATH perhaps not among them: nft lives in sbin.
DEFAULT_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
# Every outside call is bounded: a prolog that hangs holds the job (and slurmd kills it at PrologEpilogTimeout).
NFT_SECONDS = 10
SLURM_SECONDS = 10


def prolog(env: Mapping[str, str], log: Path | None = None) -> int:
    """Load the job's table on this node (replacing one of an earlier run), after sweeping stale ones."""
    return _guarded(env, log, _prolog)


def epilog(env: Mapping[str, str], log: Path | None = None) -> int:
    """Remove the job's table from this node, if it is there."""
    return _guarded(env, log, _epilog)


def _guarded(env: Mapping[str, str], log: Path | None,
             action: Callable[[JobOnNode, str, Mapping[str, str], Callable[[str], None]], None]) -> int:
    said = f"{TAG}: "
    try:
        job = JobOnNode.from_environ(env)
        said = f"{TAG}: job {job.job_id} on {job.node or socket.gethostname()}: "
        nft = shutil.which("nft", path=env.get("PATH") or DEFAULT_PATH)
        if nft is None:
            _say(log, said + "no nft here (install nftables): the job's ports stay open to every host")
            return 0
        action(job, nft, env, lambda line: _say(log, said + line))  # each step said as done: a later failure keeps it
    except HpcTrainError as error:
        _say(log, said + f"{error}; the job's ports stay open to every host")
    except Exception as error:  # noqa: BLE001 - a prolog must never fail a job: any surprise is one log line
        _say(log, said + f"{type(error).__name__}: {error}; the job's ports stay open to every host")
    return 0


def _prolog(job: JobOnNode, nft: str, env: Mapping[str, str], say: Callable[[str], None]) -> None:
    slurm = SlurmClient.local({**env, "PATH": env.get("PATH") or DEFAULT_PATH})
    _sweep(job, nft, slurm, say)
    # A heterogeneous job's component asks for its leader: every component's nodes, the ranks' tasks (firewall.py).
    guard = guarded(job, slurm.show_job_components(job.asked, timeout=SLURM_SECONDS))
    window, addresses = guard.window, resolve(guard.nodes)
    _nft(nft, ["-f", "-"], f"load table {FAMILY} {table_name(job.job_id)}", ruleset(job.job_id, window, addresses))
    whose = f" of heterogeneous job {guard.het_leader}" if guard.het_leader else ""
    say(f"ports {window.start}-{window.stop - 1}{whose} open to {', '.join(guard.nodes)} only "
        f"(table {FAMILY} {table_name(job.job_id)})")


def _epilog(job: JobOnNode, nft: str, env: Mapping[str, str], say: Callable[[str], None]) -> None:
    if job.job_id in our_tables(_nft(nft, ["list", "tables"], "list the tables")):
        _nft(nft, ["delete", "table", FAMILY, table_name(job.job_id)], "remove the job's table")
        say(f"removed table {FAMILY} {table_name(job.job_id)}")


def _sweep(job: JobOnNode, nft: str, slurm: SlurmClient, say: Callable[[str], None]) -> None:
    ours = our_tables(_nft(nft, ["list", "tables"], "list the tables"))
    if not [other for other in ours if other != job.job_id]:
        return  # nothing to sweep: Slurm need not be asked
    jobs_here = slurm.jobs_on_node(job.node, timeout=SLURM_SECONDS) if job.node else None
    if jobs_here is None:
        say("Slurm did not say which jobs run here: no table swept")
    for stale in stale_tables(ours, jobs_here, job.job_id):
        _nft(nft, ["delete", "table", FAMILY, table_name(stale)], f"sweep table {table_name(stale)}")
        say(f"swept table {FAMILY} {table_name(stale)} (job {stale} no longer here)")


def resolve(nodes: tuple[str, ...]) -> list[str]:
    """Every address each node's name resolves to (what its connections come from); HpcTrainError when one does
    not resolve: guarding the window without it would cut the job apart."""
    addresses: set[str] = set()
    for node in nodes:
        try:
            found = socket.getaddrinfo(node, None, type=socket.SOCK_STREAM)
        except socket.gaierror as error:
            raise HpcTrainError(f"node {node} does not resolve ({error.strerror})") from None
        addresses.update(str(info[4][0]).split("%")[0] for info in found)
    return sorted(addresses)


def _nft(nft: str, arguments: list[str], purpose: str, stdin: str | None = None) -> str:
    try:
        result = subprocess.run([nft, *arguments], input=stdin, capture_output=True, text=True,
                                timeout=NFT_SECONDS)
    except subprocess.TimeoutExpired:
        raise HpcTrainError(f"could not {purpose}: nft did not answer within {NFT_SECONDS} s") from None
    if result.returncode != 0:
        detail = (result.stderr.strip().splitlines() or ["no output"])[0]
        raise HpcTrainError(f"could not {purpose}: nft {' '.join(arguments)} failed ({detail})")
    return result.stdout


def _say(log: Path | None, line: str) -> None:
    print(line, file=sys.stderr, flush=True)
    try:
        syslog.syslog(syslog.LOG_NOTICE, line)
    except OSError:
        pass  # no syslog: stderr and the log file say it
    if log is not None:
        try:
            with log.open("a") as out:
                out.write(line + "\n")
        except OSError:
            pass
