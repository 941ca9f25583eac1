"""The job's secret: what every rank of a job shows the chief at the check-in (training/rendezvous.py).

One per run folder, `checkin.secret`: 32 random bytes (as hex), made by the job body before the step
(`ensure_secret`), kept across the job's requeues and retries, mode 0600 in a folder of mode 0700. The ranks find
it through HPC_TRAIN_SECRET_FILE, which holds the file's path, never the secret: the secret is never on a command
line, in an environment, or in a log (docs/security.md).
"""

from __future__ import annotations

import os
import secrets
import stat
import sys
from collections.abc import Mapping
from pathlib import Path

from hpc_train.errors import HpcTrainError

SECRET_FILE = "checkin.secret"
SECRET_ENV = "HPC_TRAIN_SECRET_FILE"  # the file's path
SECRET_BYTES = 32
PRIVATE_FOLDER = 0o700  # a run folder's mode (the umask may take more away, never add)


def ensure_secret(run_dir: Path) -> Path:
    """The run folder's secret file, made now unless it is there (a requeued job's attempts share it)."""
    path = run_dir / SECRET_FILE
    run_dir.mkdir(parents=True, exist_ok=True, mode=PRIVATE_FOLDER)
    try:
        # O_EXCL: never through a link someone left there, never over another's file; 0600 from the first byte.
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        return path
    with os.fdopen(descriptor, "w") as file:
        file.write(secrets.token_hex(SECRET_BYTES) + "\n")
        file.flush()
        os.fsync(file.fileno())
    return path


def secret_environ(run_dir: Path) -> dict[str, str]:
    """What the ranks need to find the secret: its file's absolute path in HPC_TRAIN_SECRET_FILE; nothing, with a
    warning, when it cannot be made (the ranks then check in without one, as a bare step does)."""
    try:
        return {SECRET_ENV: str(ensure_secret(run_dir).resolve())}
    except OSError as error:
        print(f"hpc-train: warning: cannot make the job's secret {run_dir / SECRET_FILE} ({error.strerror}); the "
              "ranks check in without one (docs/security.md)", file=sys.stderr, flush=True)
        return {}


def narrow_to_user(folder: Path) -> None:
    """Take group's and others' access away from a folder another library made (submitit's run folder)."""
    mode = stat.S_IMODE(folder.stat().st_mode)
    if mode & ~PRIVATE_FOLDER:
        folder.chmod(mode & PRIVATE_FOLDER)


def job_secret(environ: Mapping[str, str]) -> bytes | None:
    """The secret HPC_TRAIN_SECRET_FILE names; None when it names none (a step started without the job body).

    Refused (one line, the secret never in it) when the file cannot be read, is not the user's own regular file,
    can be read by others, or is too short."""
    name = environ.get(SECRET_ENV)
    if not name:
        return None
    try:
        descriptor = os.open(name, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as error:
        raise HpcTrainError(f"{SECRET_ENV}: cannot read the job's secret {name} ({error.strerror}); the run folder "
                            "must be on a file system every node of the job sees") from None
    with os.fdopen(descriptor, "rb") as file:
        found = os.fstat(file.fileno())
        problem = _unsafe(found)
        if problem:
            raise HpcTrainError(f"{SECRET_ENV}: the job's secret {name} {problem}; remove it and start the job "
                                "again (the job body makes a new one, mode 0600)")
        text = file.read(4 * SECRET_BYTES).strip()
    try:
        secret = bytes.fromhex(text.decode("ascii"))
    except ValueError:
        secret = b""
    if len(secret) < SECRET_BYTES:
        raise HpcTrainError(f"{SECRET_ENV}: the job's secret {name} is not {SECRET_BYTES} bytes of hex; remove it "
                            "and start the job again (the job body makes a new one)")
    return secret


def _unsafe(found: os.stat_result) -> str | None:
    if not stat.S_ISREG(found.st_mode):
        return "is not a plain file"
    if found.st_uid != os.getuid():
        return "belongs to another user"
    if found.st_mode & 0o077:
        return f"can be read by others (mode {stat.S_IMODE(found.st_mode):04o})"
    return None
