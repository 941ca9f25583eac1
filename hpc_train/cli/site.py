"""The site kit, for a cluster's administrator: a job's ports for the job's nodes alone.

    hpc-train site firewall --prolog [--log FILE]     # slurm.conf Prolog= (through a wrapper script)
    hpc-train site firewall --epilog [--log FILE]     # slurm.conf Epilog=

Run by slurmd as root on each node of a job: the prolog loads an nftables table
of the job's own (`table inet hpc_train_job_<ID>`) that accepts connections to
the job's port window only from the job's nodes, and sweeps tables that crashed
epilogs left; the epilog removes it. It always exits 0 (a failing prolog would
drain the node): without nft, or on any failure, one log line and the job runs
with its ports open. Install and limits: docs/site-firewall.md.
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("kit", choices=("firewall",), help="firewall: the job's ports for the job's nodes alone")
    when = parser.add_mutually_exclusive_group(required=True)
    when.add_argument("--prolog", action="store_true", help="as Slurm's Prolog: guard the job's ports on this node")
    when.add_argument("--epilog", action="store_true", help="as Slurm's Epilog: remove the job's table here")
    parser.add_argument("--log", default=None, metavar="FILE", help="also append each line said to FILE")


def run(args: argparse.Namespace) -> int:
    import os
    from pathlib import Path

    from hpc_train.site import kit

    log = Path(args.log) if args.log else None
    return kit.prolog(os.environ, log) if args.prolog else kit.epilog(os.environ, log)
