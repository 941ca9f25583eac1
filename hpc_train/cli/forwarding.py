"""`--remote NAME` (or $HPC_TRAIN_REMOTE) on submit, status, logs, cancel, list and report: the verb runs on the
remote's login node, by its own hpc-train, instead of here. Not a subcommand: cli.main calls it before a verb."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence

TYPE_CHECKING = False  # (typing itself costs start-up)
if TYPE_CHECKING:
    from hpc_train.remote.config import Remote

# Options that mean something here only: dropped from what the remote runs (True: they take a value).
SUBMIT_OPTIONS_HERE = {"--remote": True, "--no-snapshot": False, "--snapshot-exclude": True}
ABBREVIATED = 5  # argparse takes an unambiguous prefix: "--rem" and longer are --remote


def add_remote_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--remote", default=None, metavar="NAME",
                        help="run it on a remote's login node (hpc-train remote add); default $HPC_TRAIN_REMOTE, "
                             "else where the job was submitted from here; submit: several, a,b or all, go to the "
                             "one whose Slurm would start it first")


def without(argv: Sequence[str], dropped: Mapping[str, bool]) -> list[str]:
    """argv less the `dropped` options (and their values: `--opt V` or `--opt=V`, argparse's prefixes too)."""
    kept, skip = [], False
    for token in argv:
        if skip:
            skip = False
            continue
        name = token.split("=", 1)[0]
        matched = next((option for option in dropped if name.startswith("--") and
                        (name == option or (len(name) >= ABBREVIATED and option.startswith(name)))), None)
        if matched is None:
            kept.append(token)
        else:
            skip = dropped[matched] and "=" not in token
    return kept


def forwarded(options: Sequence[str], verb: str, command: Sequence[str] | None,
              dropped: Mapping[str, bool]) -> list[str]:
    """What the remote's hpc-train runs: the verb and its options (less those of this side), then `-- COMMAND`."""
    own = list(options[list(options).index(verb):])
    return [*without(own, dropped), *(["--", *command] if command is not None else [])]


def run_remote(args: argparse.Namespace, name: str, options: Sequence[str], environ: Mapping[str, str]) -> int:
    """Run the parsed verb on remote `name` (submit: on the earliest of several, `a,b` or `all`); its exit code."""
    import sys

    from hpc_train.errors import HpcTrainError
    from hpc_train.remote import config, earliest, run

    names = earliest.names(name, environ) if name == earliest.ALL or "," in name else [config.find(name, environ).name]
    if len(names) > 1 and args.subcommand != "submit":
        names = _followed(args, names, environ)
    if len(names) > 1 and args.subcommand != "submit":
        raise HpcTrainError(f"--remote {name}: only submit chooses among several remotes; name one for "
                            f"{args.subcommand} (hpc-train {args.subcommand} follows a job submitted from here "
                            "without --remote)")
    if args.subcommand == "submit":
        return _submit(args, names, options, environ)
    remote = config.find(names[0], environ)
    argv = forwarded(options, args.subcommand, None, {"--remote": True})
    follow = args.subcommand == "logs" and args.follow
    return run.forward(remote, argv, environ, tty=follow and sys.stdin.isatty() and sys.stdout.isatty())


def _followed(args: argparse.Namespace, names: list[str], environ: Mapping[str, str]) -> list[str]:
    """Of several remotes (HPC_TRAIN_REMOTE=a,b), the one a job id was sent to from here, when it is one of them."""
    from hpc_train.remote.sent import where

    sent_to = where(getattr(args, "job", None), environ)
    return [sent_to] if sent_to in names else names


def _submit(args: argparse.Namespace, names: Sequence[str], options: Sequence[str],
            environ: Mapping[str, str]) -> int:
    """Snapshot the code here, copy it to the remote (of several, the one that starts it first), submit from the
    copy there; the job id it printed is remembered here, with the remote (remote/sent.py)."""
    from pathlib import Path

    from hpc_train.errors import HpcTrainError
    from hpc_train.remote import config, run, scripts, sent
    from hpc_train.remote.snapshots import snapshot_here
    from hpc_train.remote.transfer import push_snapshot

    if args.local:
        raise HpcTrainError("--local with --remote: --local runs the job here; drop one of them")
    if getattr(args, "output_dir", None) is not None:  # the snapshot goes to ./runs here and there
        raise HpcTrainError("--output-dir with --remote: the remote's runs folder is its workdir's runs; drop it")
    listed = any("," in (value or "") for value in (args.partition, getattr(args, "ps_partition", None)))
    verb = "submit --partition A,B" if listed else "submit"  # a partition list: a login node of protocol 2
    remote = config.find(names[0], environ) if len(names) == 1 else _earliest(args, names, verb, environ)
    rest = forwarded(options, "submit", args.command, SUBMIT_OPTIONS_HERE)
    if getattr(args, "no_snapshot", False):  # the job runs the code already in the workdir
        code, said = run.forward_submit(remote, ["submit", "--no-snapshot", *rest[1:]], environ, verb=verb)
    else:
        run.connect(remote, environ, verb)  # a login node too old to submit it: said before a snapshot is taken
        digest, root, relative = snapshot_here(Path.cwd(), getattr(args, "snapshot_exclude", None) or [],
                                               int(args.snapshot_limit_mb * 1024 * 1024))
        there = push_snapshot(remote, root, digest, environ)
        folder = scripts.joined(there, "files", "" if relative == "." else relative)
        code, said = run.forward_submit(remote, ["submit", "--in-snapshot", *rest[1:]], environ, folder, verb)
    if code == 0 and said.strip().isdigit():  # (a dry run prints its script: nothing to remember)
        sent.remember(said.strip(), remote.name, environ)
    return code


def _earliest(args: argparse.Namespace, names: Sequence[str], verb: str, environ: Mapping[str, str]) -> Remote:
    """The remote whose Slurm would start this very request first (sbatch --test-only on each, at once); every
    one's estimate on one stderr line, each skipped one's reason on a line of its own."""
    import sys

    from hpc_train.cli.joboptions import job_request
    from hpc_train.errors import HpcTrainError
    from hpc_train.login.preflight import test_only_options
    from hpc_train.remote import config, earliest
    from hpc_train.remote.ssh import connect_timeout, slurm_timeout

    remotes = [config.find(name, environ) for name in names]
    spec = job_request(args)[0]
    seconds = connect_timeout(environ) + slurm_timeout(environ)
    estimates = earliest.estimate_all(remotes, test_only_options(spec), environ, seconds, verb)
    chosen = earliest.choose(estimates)
    if chosen is None:
        raise HpcTrainError(earliest.nothing_line(estimates, seconds))
    for estimate in estimates:
        if estimate.start is None:
            print(earliest.skipped_line(estimate, seconds), file=sys.stderr)
    print(earliest.summary(estimates, chosen, seconds), file=sys.stderr, flush=True)
    return remotes[names.index(chosen.remote)]
