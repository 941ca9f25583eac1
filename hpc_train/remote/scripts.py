"""The shell lines ssh runs on a login node, and what their answers mean (pure).

Every user value is quoted here; the remote's `setup` is the one field that is shell
on purpose (`source ~/venvs/hpc/bin/activate`, `export VAR=...`): it runs in the
same shell as hpc-train, just before it.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from hpc_train.exitcodes import EXIT_REFUSED
from hpc_train.remote.config import ENV_REMOTE, Remote
from hpc_train.remote.protocol import parse_version_line

NOT_FOUND = 127  # the shell's status for a command it cannot find
PROBE_FILE = ".hpc-train-probe"


def shell_path(path: str) -> str:
    """A login node's path for its shell: `~/X` under $HOME (a quoted ~ would not expand), the rest quoted."""
    if path == "~":
        return '"$HOME"'
    if path.startswith("~/"):
        return '"$HOME"/' + shlex.quote(path[2:])
    return shlex.quote(path)


def rsync_path(path: str) -> str:
    """The same path for rsync, whose relative paths start at the login node's home."""
    if path == "~":
        return "."
    return path[2:] if path.startswith("~/") else path


def joined(*parts: str) -> str:
    """Paths joined with '/', the first as given (absolute, or ~/...)."""
    return "/".join(part.rstrip("/") for part in parts if part)


def mkdir_script(path: str) -> str:
    """Make a folder there and its parents (rsync's --mkpath needs rsync 3.2.3, which many login nodes lack)."""
    return f"mkdir -p -- {shell_path(path)}"


def _refuse(message: str, code: int = EXIT_REFUSED) -> str:
    return f"{{ echo {shlex.quote(message)} >&2; exit {code}; }}"


def _setup(remote: Remote) -> str:
    """The remote's setup, in braces on its own line so that a trailing `;` or comment cannot swallow the rest."""
    return f"{{ {remote.setup}\n}}" if remote.setup.strip() else ":"


def verb_script(remote: Remote, argv: Sequence[str], folder: str | None = None) -> str:
    """cd to the folder (default: the workdir), run setup, then `hpc-train ARGV`; each failure one line."""
    verb = f"hpc-train {argv[0]}" if argv else "hpc-train"
    here = folder or remote.workdir
    return "\n".join([
        f"cd {shell_path(here)} 2>/dev/null || "
        + _refuse(f"{verb}: error: no folder {here} on {remote.host}; check remote {remote.name}'s --workdir "
                  f"(hpc-train remote check {remote.name})"),
        f"{_setup(remote)} || " + _refuse(f"{verb}: error: --setup of remote {remote.name} failed on {remote.host}: "
                                          f"{remote.setup}; try it there by hand (ssh {remote.host})"),
        "command -v hpc-train >/dev/null 2>&1 || " + _refuse(_missing(remote, verb), NOT_FOUND),
        f"{ENV_REMOTE}= exec hpc-train {shlex.join(argv)}",
    ])


def _missing(remote: Remote, verb: str) -> str:
    return (f"{verb}: error: hpc-train not found on {remote.host} after --setup; install it there (pip install "
            f"hpc-train) or set a --setup that puts it on PATH, e.g. 'source ~/venvs/hpc/bin/activate'")


# The Slurm calls `remote check` makes there, each bounded: a Slurm that retries (SLURM_CONF naming a missing file,
# slurmctld down) is named, not mistaken for ssh.
SLURM_CALLS = ("sinfo --version", "sinfo -h -o %P")
VERSION_SECONDS = 30  # `hpc-train --version` there: it imports no TensorFlow, but a cold NFS may be slow
TIMED_OUT = (124, 137)  # timeout(1)'s status when the command ran out of time (137: it then had to KILL it)


def _bounded(call: str, seconds: int) -> str:
    """Run `call` (a constant of ours) within `seconds`: its output in $said, `slurm_silent=CALL` echoed (and the
    line false) when it did not answer; timeout(1) is coreutils', on every Linux login node (else unbounded)."""
    codes = "|".join(str(code) for code in TIMED_OUT)
    return (f"said=$(if command -v timeout >/dev/null 2>&1; then timeout -k 2 {seconds} {call}; else {call}; fi "
            f"2>&1); s=$?; case $s in {codes}) echo {shlex.quote(f'slurm_silent={call}')}; false;; "
            "*) true;; esac")


def probe_script(remote: Remote, slurm_seconds: int | None = None, version_seconds: int = VERSION_SECONDS) -> str:
    """Lines `key=value`: whether the workdir can be written (made if missing), setup ran, hpc-train's version line
    there (within `version_seconds`: one that hangs says so), and with `slurm_seconds`, whether Slurm answers
    (sinfo, each call within that many seconds)."""
    work = shell_path(remote.workdir)
    probe = f"{work}/{PROBE_FILE}"
    lines = [
        f"if said=$(mkdir -p -- {work} 2>&1 && touch -- {probe} 2>&1 && rm -f -- {probe} 2>&1); "
        'then echo workdir=ok; else echo "workdir=$(echo "$said" | tail -n 1)"; fi',
        f"cd {work} 2>/dev/null",
        f"if {_setup(remote)} </dev/null >/dev/null 2>&1; then echo setup=ok; else echo setup=failed; fi",
        "if command -v hpc-train >/dev/null 2>&1; then said=$(if command -v timeout >/dev/null 2>&1; then "
        f"{ENV_REMOTE}= timeout -k 2 {version_seconds} hpc-train --version 2>&1; else {ENV_REMOTE}= hpc-train "
        f"--version 2>&1; fi); case $? in {'|'.join(map(str, TIMED_OUT))}) echo "
        f"{shlex.quote(f'version=hpc-train --version did not answer within {version_seconds} s')};; "
        '*) echo "version=$(echo "$said" | tail -n 1)";; esac; else echo version=; fi',
    ]
    if slurm_seconds is not None:
        version, partitions = (_bounded(call, slurm_seconds) for call in SLURM_CALLS)
        lines.append(f"if ! command -v sinfo >/dev/null 2>&1; then echo slurm_failed=; elif {version}; then "
                     'v=$(echo "$said" | tail -n 1); '
                     f'if {partitions}; then [ $s = 0 ] && echo "slurm=$v" || '
                     'echo "slurm_failed=$v: $(echo "$said" | tail -n 1)"; fi; fi')
    return "\n".join(lines)


@dataclass(frozen=True)
class Probe:
    """What a login node answered to probe_script."""

    workdir: str  # "ok", or why it cannot be written
    setup_ok: bool
    version: str | None  # hpc-train's `--version` line there; None when it is not on PATH
    slurm: str | None = None  # "slurm 22.05.8" when Slurm answered
    slurm_problem: str = ""
    slurm_silent: str = ""  # the Slurm call that did not answer in time


def parse_probe(text: str) -> Probe:
    values = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    return Probe(values.get("workdir", "no answer"), values.get("setup") == "ok", values.get("version") or None,
                 values.get("slurm") or None, values.get("slurm_failed", ""), values.get("slurm_silent", ""))


def slurm_line(remote: Remote, probe: Probe, seconds: int) -> tuple[bool, str]:
    """`remote check`'s Slurm line: it answers, one call did not answer in time, or it failed."""
    if probe.slurm is not None:
        return True, f"Slurm: {probe.slurm} answers"
    if probe.slurm_silent:
        return False, (f"Slurm: `{probe.slurm_silent}` did not answer within {seconds} s on {remote.host} after "
                       "--setup (ssh is fine); check SLURM_CONF and that slurmctld answers there")
    said = probe.slurm_problem or "no sinfo on PATH"
    return False, (f"Slurm: does not answer on {remote.host} after --setup ({said}); the login node needs Slurm's "
                   "commands and SLURM_CONF there")


def build_problem(remote: Remote, said: str | None) -> str | None:
    """Why hpc-train on the remote does not run (missing, or its --version fails), or None."""
    if said is None:
        return _missing(remote, "hpc-train").split("error: ", 1)[1]
    if parse_version_line(said) is None:
        return f"hpc-train on {remote.host} does not start after --setup: {said}; try it there (ssh {remote.host})"
    return None


def setup_problem(remote: Remote) -> str:
    return (f"--setup of remote {remote.name} failed on {remote.host}: {remote.setup}; try it there by hand "
            f"(ssh {remote.host})")


def probe_problem(remote: Remote, probe: Probe) -> str | None:
    """The first problem that stops every verb on this remote, or None (its protocol: protocol.protocol_problem)."""
    if probe.workdir != "ok":
        return (f"workdir {remote.workdir} on {remote.host} cannot be written ({probe.workdir}); pick another: "
                f"hpc-train remote remove {remote.name}, then remote add {remote.name} --workdir DIR")
    if not probe.setup_ok:
        return setup_problem(remote)
    return build_problem(remote, probe.version)


def folders_script(remote: Remote, job: str) -> str:
    """The names of a job's run folders under the workdir's runs/ (a sweep's: its own and each element's)."""
    quoted = shlex.quote(job)
    return (f"cd {shell_path(joined(remote.workdir, 'runs'))} 2>/dev/null || exit 0\n"
            f"for d in *-{quoted} *-{quoted}_*; do [ -d \"$d\" ] && printf '%s\\n' \"$d\"; done; exit 0")
