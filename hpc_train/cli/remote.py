"""Name a cluster's login node, reached over ssh, for --remote: add, list, remove, check.

    hpc-train remote add cluster --host login.example.org --workdir '~/hpc' --setup 'source ~/venvs/hpc/bin/activate'
    hpc-train remote list
    hpc-train remote check cluster     # reachable, hpc-train and Slurm answer there, workdir writable: a line each
    hpc-train remote remove cluster

HOST is what `ssh HOST` reaches, so your ~/.ssh/config applies (keys, agent,
ProxyJump). --setup runs on the login node before hpc-train, in the same shell.
The remotes live in $XDG_CONFIG_HOME/hpc-train/remotes.yaml (default ~/.config).
Then: hpc-train submit|status|logs|cancel|list|report --remote NAME ..., and
hpc-train pull ID --remote NAME. See docs/laptop.md.
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    add = actions.add_parser("add", help="name a login node")
    add.add_argument("name", metavar="NAME")
    add.add_argument("--host", required=True, help="what `ssh HOST` reaches")
    add.add_argument("--workdir", required=True, metavar="DIR",
                     help="a folder on the login node (absolute, or ~/DIR): jobs' runs/ go under it")
    add.add_argument("--setup", default="", metavar="CMD",
                     help="shell run before hpc-train there, e.g. 'source ~/venvs/hpc/bin/activate'")
    actions.add_parser("list", help="the remotes")
    remove = actions.add_parser("remove", help="forget a remote")
    remove.add_argument("name", metavar="NAME")
    check = actions.add_parser("check", help="reachable, hpc-train, Slurm, workdir: a line each")
    check.add_argument("name", metavar="NAME", nargs="?", default=None, help="default $HPC_TRAIN_REMOTE")


def run(args: argparse.Namespace) -> int:
    import os

    from hpc_train.errors import HpcTrainError
    from hpc_train.remote import config

    remotes = config.load(os.environ)
    if args.action == "list":
        if not remotes:
            print(f"no remotes yet in {config.config_file(os.environ)}; add one: hpc-train remote add NAME "
                  "--host HOST --workdir DIR")
        for remote in remotes.values():
            print(f"{remote.name}\t{remote.host}\t{remote.workdir}" + (f"\tsetup: {remote.setup}" if remote.setup
                                                                          else ""))
        return 0
    if args.action == "add":
        if args.name in remotes:
            raise HpcTrainError(f"remote {args.name!r} exists; hpc-train remote remove {args.name} first")
        remote = config.Remote(args.name, args.host, args.workdir, args.setup)
        path = config.save({**remotes, remote.name: remote}, os.environ)
        print(f"hpc-train remote: added {remote.name} ({remote.host}:{remote.workdir}) to {path}; "
              f"check it: hpc-train remote check {remote.name}")
        return 0
    if args.action == "remove":
        config.find(args.name, os.environ)
        path = config.save({name: remote for name, remote in remotes.items() if name != args.name}, os.environ)
        print(f"hpc-train remote: removed {args.name} from {path}")
        return 0
    return _check(args.name, os.environ)


def _check(name: str | None, environ: dict[str, str] | os._Environ[str]) -> int:
    from hpc_train.errors import HpcTrainError
    from hpc_train.remote import config
    from hpc_train.remote.run import check

    name = config.chosen(name, environ)
    if name is None:
        raise HpcTrainError("which remote? hpc-train remote check NAME (or set HPC_TRAIN_REMOTE)")
    lines = check(config.find(name, environ), environ)
    for ok, text in lines:
        print(f"{'ok  ' if ok else 'FAIL'} {text}")
    return 0 if all(ok for ok, _ in lines) else 1
