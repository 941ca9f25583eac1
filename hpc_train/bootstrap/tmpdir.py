"""A rank's own temporary directory, one per attempt, removed when the attempt ends, whatever ended it (issue 46).

TensorFlow's autograph writes an `__autograph_generated_file*.py` into tempfile.gettempdir() for each function it
converts and removes them only at a normal interpreter exit, so a killed, requeued or retried rank left them in
/tmp, on every node of the attempt, for good. Every rank of a job therefore gets a directory of its own, made
before anything of TensorFlow starts and exported to it, and to a user's command, as TMPDIR (TEMP, TMP):

    $TMPDIR/hpc-train-JOBID-RESTART-STEP-RANK   (the node's own TMPDIR as Slurm gives it, else /tmp; mode 0700)

named by the job's id, the attempt (Slurm's restart count, which a requeue raises, and the step, which a retry
changes) and the rank, so that no two jobs, attempts or ranks share one. It is node-local (never the shared run
folder: slow, and shared). The rank removes it as it ends (`made`'s context); srun's task epilog
(`task_epilog`'s script, run by slurmstepd after each task, however the task ended: a kill, a requeue, a failed
peer) removes it when the rank could not; the mock launcher does the same for its ranks on this machine. The
name is computed from the step's variables alone (pure: `rank_tmpdir`), so the rank, the epilog and the
launcher agree on it without telling each other.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from pathlib import Path

PREFIX = "hpc-train-"
# What the rank and what it starts read as their temporary directory (tempfile's, TensorFlow's, the shell's).
VARIABLES = ("TMPDIR", "TEMP", "TMP")
# The variable a rank's own directory is also named by (the base stays in TMPDIR's first value, for the epilog).
OWN = "HPC_TRAIN_TMPDIR"
EPILOG_FILE = "task-epilog.sh"
# srun's --task-epilog: the same name from the same variables, removed (a POSIX shell script, no Python to start).
TASK_EPILOG = f"""#!/bin/sh
# hpc-train's task epilog (srun --task-epilog): the rank's own temporary directory removed, however it ended.
base="${{TMPDIR:-/tmp}}"
[ -d "$base" ] || base=/tmp
[ -n "$SLURM_JOB_ID" ] && [ -n "$SLURM_PROCID" ] || exit 0
rm -rf -- "$base/{PREFIX}$SLURM_JOB_ID-${{SLURM_RESTART_COUNT:-0}}-${{SLURM_STEP_ID:-0}}-$SLURM_PROCID"
exit 0
"""


def base_of(environ: Mapping[str, str]) -> Path:
    """The node's own temporary folder: TMPDIR as Slurm (or the site) gives it when it is a folder, else /tmp."""
    given = environ.get("TMPDIR", "")
    return Path(given) if given and os.path.isdir(given) else Path("/tmp")


def rank_tmpdir(environ: Mapping[str, str]) -> Path | None:
    """This rank's directory for this attempt, from the step's variables; None outside a step (no job id or rank:
    a run by hand keeps the temporary folder it has)."""
    job, rank = environ.get("SLURM_JOB_ID", ""), environ.get("SLURM_PROCID", "")
    if not job or not rank:
        return None
    attempt = f"{environ.get('SLURM_RESTART_COUNT') or 0}-{environ.get('SLURM_STEP_ID') or 0}"
    return base_of(environ) / f"{PREFIX}{job}-{attempt}-{rank}"


def own_private_folder(path: Path) -> bool:
    """Whether `path` is a folder (not a link) of this user's that no one else may read or write: a name in a shared
    /tmp that another user made first must not become the rank's (autograph imports the code it writes there)."""
    import stat

    status = path.lstat()
    return stat.S_ISDIR(status.st_mode) and status.st_uid == os.getuid() and not status.st_mode & 0o077


def variables(path: Path) -> dict[str, str]:
    """What the rank exports for its directory: TMPDIR, TEMP, TMP and HPC_TRAIN_TMPDIR (pure)."""
    return {**{name: str(path) for name in VARIABLES}, OWN: str(path)}


def remove(path: Path | None) -> None:
    """The directory gone, whatever is in it (a rank that ends; the launcher after its rank)."""
    if path is not None:
        shutil.rmtree(path, ignore_errors=True)


@contextmanager
def made(environ: MutableMapping[str, str]) -> Iterator[Path | None]:
    """This rank's directory made (0700) and exported in `environ` (and so to TensorFlow: tempfile reads TMPDIR
    again), removed when the block ends; nothing outside a step, or where the node's temporary folder refuses it."""
    path = rank_tmpdir(environ)
    if path is not None:
        try:
            path.mkdir(mode=0o700, exist_ok=True)
            if not own_private_folder(path):
                path = None  # someone else's (its name is easy to guess): never written into, nor removed
        except OSError:
            path = None  # (a full or read-only /tmp: the rank runs with the folder it had, as before)
    if path is None:
        yield None
        return
    exported = variables(path)
    before = {name: environ.get(name) for name in exported}
    environ.update(exported)
    if environ is os.environ:
        tempfile.tempdir = None  # (gettempdir() caches its first answer: asked again, it reads TMPDIR)
    try:
        yield path
    finally:
        remove(path)
        # The folder it had, back: code of the same process that runs on (a test, an in-process rank) must not be
        # left pointing into a removed folder.
        for name, value in before.items():
            if value is None:
                environ.pop(name, None)
            else:
                environ[name] = value
        if environ is os.environ:
            tempfile.tempdir = None


def task_epilog(folder: Path) -> Path:
    """The task epilog's script in `folder` (a folder every node reads: the run folder), written once, executable;
    its path, for srun's --task-epilog."""
    script = folder / EPILOG_FILE
    if not script.is_file() or script.read_text() != TASK_EPILOG:
        partial = folder / f".task-epilog.sh.{os.getpid()}"
        partial.write_text(TASK_EPILOG)
        partial.chmod(0o755)
        partial.replace(script)
    return script
