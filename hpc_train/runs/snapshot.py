"""The code a job runs: an immutable snapshot of the user's code, taken at submit time.

A requeued or retried job restarts from its batch script, and runs whatever code is on disk by then; a job runs
from a snapshot instead, so that an edit made while it waits in the queue, or between two attempts, changes
nothing. A snapshot holds the files git would (tracked at HEAD with their uncommitted changes, and untracked
ones that are not ignored), or, outside git, the directory's files; never the runs folder. It is stored once per
content hash, in runs/snapshots/<digest>/:

    snapshot.json   the tree's provenance: git commit (full hash, or null), dirty, its untracked files
    diff.patch      the uncommitted diff against HEAD (when dirty)
    files/          the copied tree (the git top level, or the submitted directory), files read-only

`list_tree` and `select` decide what goes in (`select` is pure), `take_snapshot` stores it atomically (copied
into a temporary folder beside, then renamed: a digest already there is reused, not rewritten),
`stored_snapshot` finds one already stored (rsynced to a remote by `hpc-train submit --remote`). It sits
beside the run folders (runs/snapshots/) because both sides read it: submit takes it, the job body records it
(provenance.py). How a job's settings read inside it is the login side's (login/snapshot_settings.py).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from hpc_train.errors import HpcTrainError

SNAPSHOTS = "snapshots"  # the folder in the runs root: runs/snapshots/<digest>/
MANIFEST = "snapshot.json"
DIFF = "diff.patch"
DEFAULT_LIMIT = 50 * 1024 * 1024  # data is not code: a tree bigger than this is refused (--snapshot-limit-mb)
DIGEST_CHARS = 16
# Never code: git's own folder, and Python's bytecode (rewritten by every interpreter that imports the files).
ALWAYS_LEFT_OUT = (".git", "__pycache__", "*.pyc")


@dataclass(frozen=True)
class Snapshot:
    """A stored snapshot (or, for a dry run, where it would be stored)."""

    digest: str  # content hash of the stored tree (sha256 hex, shortened)
    root: Path  # runs/snapshots/<digest> (absolute)
    files: Path  # root / "files": the copied tree (git top level, or the submit directory when not in git)
    workdir: Path  # files / <the submit directory relative to the tree's top>: where the ranks run


@dataclass(frozen=True)
class Tree:
    """What a snapshot of a directory holds, before it is stored: its top, its files, and git's word on them."""

    top: Path  # the git top level, or the directory itself outside git (absolute)
    files: tuple[str, ...]  # paths relative to top, POSIX, sorted
    commit: str | None = None  # HEAD's full hash; None outside git, or before the first commit
    dirty: bool = False  # uncommitted changes, or untracked files, in the snapshot
    diff: str = ""  # `git diff HEAD` (the tracked files' uncommitted changes)
    untracked: tuple[str, ...] = ()
    git: bool = False  # the files are git's (top is a repository's top level)


def excluded(path: str, patterns: Iterable[str]) -> bool:
    """Whether a relative POSIX path is left out by gitignore-like globs (pure): a pattern without a slash matches
    any component's name (`*.npz`, `data`), one with a slash the path from the top or a folder of it (`data/raw`,
    `/big`); a trailing slash matches folders only."""
    parts = path.split("/")
    for pattern in patterns:
        folders_only, anchored = pattern.endswith("/"), "/" in pattern.rstrip("/")
        pattern = pattern.strip("/")
        if not pattern:
            continue
        if not anchored:
            names = parts[:-1] if folders_only else parts
            if any(fnmatch.fnmatchcase(name, pattern) for name in names):
                return True
            continue
        prefixes = ["/".join(parts[:end]) for end in range(1, len(parts) + (0 if folders_only else 1))]
        if any(fnmatch.fnmatchcase(prefix, pattern) for prefix in prefixes):
            return True
    return False


def select(paths: Iterable[str], runs: str | None, patterns: Sequence[str]) -> tuple[str, ...]:
    """The paths a snapshot keeps (pure): not under `runs` (the runs folder relative to the top, if in it), not
    git's or Python's bytecode, not excluded by `patterns`; sorted, each once."""
    def kept(path: str) -> bool:
        inside_runs = runs is not None and (path == runs or path.startswith(runs.rstrip("/") + "/"))
        return not inside_runs and not excluded(path, ALWAYS_LEFT_OUT) and not excluded(path, patterns)

    return tuple(sorted({path for path in paths if kept(path)}))


def _git(directory: Path, *arguments: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "-C", str(directory), *arguments], capture_output=True, timeout=120)


def list_tree(directory: Path, runs: Path, exclude: Sequence[str] = ()) -> Tree:
    """What a snapshot of `directory` holds: git's files when it is in a repository, else every file under it."""
    directory = directory.resolve()
    top = _git_top(directory)
    base = top or directory
    runs = runs.resolve()
    runs_inside = runs.relative_to(base).as_posix() if runs.is_relative_to(base) else None
    if top is None:
        return Tree(directory, select(_walk(directory, runs), runs_inside, exclude))
    listed = _git(top, "ls-files", "-z", "--cached", "--others", "--exclude-standard").stdout
    names = {os.fsdecode(name) for name in listed.split(b"\0") if name}
    paths = select([path for path in names if _is_file(top / path)], runs_inside, exclude)
    others = _git(top, "ls-files", "-z", "--others", "--exclude-standard").stdout
    untracked = tuple(path for path in (os.fsdecode(name) for name in others.split(b"\0") if name) if path in paths)
    commit, diff = git_state(top)
    return Tree(top, paths, commit, bool(diff or untracked or commit is None), diff, untracked, git=True)


def git_state(directory: Path) -> tuple[str | None, str]:
    """HEAD's full hash (None outside git or before the first commit) and the uncommitted diff against it."""
    head = _git(directory, "rev-parse", "--verify", "-q", "HEAD^{commit}")
    if head.returncode != 0:
        return None, ""
    diff = _git(directory, "diff", "HEAD", "--binary", "--no-color", "--no-ext-diff").stdout
    return head.stdout.decode().strip(), diff.decode(errors="replace")


def _git_top(directory: Path) -> Path | None:
    """The git top level `directory` is in; None outside git (or without git)."""
    try:
        shown = _git(directory, "rev-parse", "--show-toplevel")
    except (OSError, subprocess.TimeoutExpired):
        return None
    return Path(shown.stdout.decode().strip()).resolve() if shown.returncode == 0 else None


def _is_file(path: Path) -> bool:
    """A file or a symbolic link (a submodule's folder, or a tracked file deleted since, is not)."""
    return path.is_symlink() or path.is_file()


def _walk(directory: Path, runs: Path) -> list[str]:
    found = []
    for folder, names, files in os.walk(directory):  # (not into the runs folder: checkpoints can be many)
        names[:] = [name for name in names if not excluded(name, ALWAYS_LEFT_OUT) and Path(folder, name) != runs]
        found += [(Path(folder) / name).relative_to(directory).as_posix() for name in files]
    return [path for path in found if _is_file(directory / path)]


def check_size(tree: Tree, limit_bytes: int) -> None:
    """Refuse a tree over the limit, in one line naming its biggest files and the fix that fits each."""
    sizes = {path: (tree.top / path).lstat().st_size for path in tree.files}
    total = sum(sizes.values())
    if total <= limit_bytes:
        return
    biggest = sorted(sizes, key=lambda path: -sizes[path])[:3]
    named = ", ".join(f"{path} ({_mb(sizes[path])})" for path in biggest)
    # The advice is for the files whose absence would make it fit (the biggest first), not every file named.
    heavy = [path for at, path in enumerate(biggest) if total - sum(sizes[p] for p in biggest[:at]) > limit_bytes]
    raise HpcTrainError(f"the code snapshot of {tree.top} would hold {_mb(total)}, over its {_mb(limit_bytes)} "
                        f"limit; biggest: {named}; data is not code: {size_advice(tree, heavy)} (reach data by "
                        "absolute path or $HPC_TRAIN_SUBMIT_DIR), raise --snapshot-limit-mb, or --no-snapshot")


def size_advice(tree: Tree, paths: Sequence[str]) -> str:
    """How to leave these files out (pure): .gitignore does nothing to a file git tracks, nor outside git."""
    tracked = [path for path in paths if tree.git and path not in tree.untracked]
    if not tracked:
        return ("add them to .gitignore or --snapshot-exclude PATTERN" if tree.git else
                "leave them out with --snapshot-exclude PATTERN")
    it = "it" if len(tracked) == 1 else "them"
    excludes = " ".join(f"--snapshot-exclude {shlex.quote(path)}" for path in tracked)
    advice = (f"git tracks {', '.join(tracked)}: leave {it} out with {excludes}, or untrack {it} (git rm --cached "
              f"{' '.join(shlex.quote(path) for path in tracked)}, then add {it} to .gitignore)")
    rest = len(paths) > len(tracked)
    return advice + ("; the others: add them to .gitignore or --snapshot-exclude PATTERN" if rest else "")


def _mb(size: int) -> str:
    return f"{size / 1024 / 1024:.1f} MB"


def _entry(path: str, source: Path) -> tuple[str, bytes | None]:
    """A file's mode word and content (None for a link, whose target is the word)."""
    if source.is_symlink():
        return f"l:{os.readlink(source)}", None
    return ("x" if os.access(source, os.X_OK) else "-"), source.read_bytes()


def _hash_line(path: str, mode: str, content: bytes | None) -> bytes:
    digest = hashlib.sha256(content).hexdigest() if content is not None else ""
    return os.fsencode(path) + b"\0" + mode.encode() + b"\0" + digest.encode() + b"\n"


def _manifest(tree: Tree) -> dict:
    """What snapshot.json says of the tree (the versions are the run folder's: provenance.json, the job's)."""
    return {"commit": tree.commit, "dirty": tree.dirty, "top": str(tree.top), "files": len(tree.files),
            "untracked": list(tree.untracked)}


def _copy_and_hash(tree: Tree, into: Path | None) -> str:
    """The tree's digest; with `into`, its files copied there (as read, read-only): what is hashed is what is stored."""
    hasher = hashlib.sha256(f"commit {tree.commit}\n".encode())
    for path in tree.files:
        source = tree.top / path
        mode, content = _entry(path, source)
        hasher.update(_hash_line(path, mode, content))
        if into is None:
            continue
        target = into / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if content is None:
            os.symlink(mode[2:], target)
        else:
            target.write_bytes(content)
            target.chmod(0o555 if mode == "x" else 0o444)
    return hasher.hexdigest()[:DIGEST_CHARS]


def snapshot_at(root: Path, top: Path, submit_dir: Path) -> Snapshot:
    """The Snapshot stored at `root` of a tree whose top is `top`, submitted from `submit_dir` (pure)."""
    files = root / "files"
    relative = submit_dir.resolve().relative_to(top)
    return Snapshot(root.name, root, files, files / relative if relative.parts else files)


def plan_snapshot(submit_dir: Path, runs: Path, exclude: Sequence[str] = (),
                  limit_bytes: int = DEFAULT_LIMIT) -> Snapshot:
    """The snapshot take_snapshot would store, nothing written (a dry run); refused as it would be."""
    tree = list_tree(submit_dir, runs, exclude)
    check_size(tree, limit_bytes)
    return snapshot_at(runs.absolute() / SNAPSHOTS / _copy_and_hash(tree, None), tree.top, submit_dir)


def take_snapshot(submit_dir: Path, runs: Path, exclude: Sequence[str] = (),
                  limit_bytes: int = DEFAULT_LIMIT) -> Snapshot:
    """Store the snapshot of the code submitted from `submit_dir` in runs/snapshots/ (reused when stored already)."""
    tree = list_tree(submit_dir, runs, exclude)
    check_size(tree, limit_bytes)
    folder = runs.absolute() / SNAPSHOTS
    folder.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=".partial-", dir=folder))
    # (mkdtemp's mode, 0700, is kept: the code is the user's alone, as the run folders beside it)
    try:
        (partial / "files").mkdir()  # (a folder with no code yet is a snapshot too: the ranks start in it)
        digest = _copy_and_hash(tree, partial / "files")
        (partial / MANIFEST).write_text(json.dumps({"digest": digest, **_manifest(tree)}, indent=2) + "\n")
        if tree.diff:
            (partial / DIFF).write_text(tree.diff)
        root = folder / digest
        if not (root / MANIFEST).is_file():
            try:
                partial.rename(root)
            except OSError:  # stored meanwhile by another submit (rename never replaces a folder that holds files)
                if not (root / MANIFEST).is_file():
                    raise
    finally:
        if partial.exists():
            shutil.rmtree(partial)
    return snapshot_at(root, tree.top, submit_dir)


def stored_snapshot(workdir: Path) -> Snapshot:
    """The snapshot `workdir` is in (stored already, e.g. rsynced to a remote): the folder above holding
    snapshot.json; one line when there is none."""
    workdir = workdir.absolute()
    for root in (workdir, *workdir.parents):
        if (root / MANIFEST).is_file():
            files = root / "files"
            if workdir.is_relative_to(files):
                return Snapshot(root.name, root, files, workdir)
            break
    raise HpcTrainError(f"--in-snapshot: {workdir} is not in a stored code snapshot (no {MANIFEST} above it, beside "
                        f"a files/ folder); run it from runs/{SNAPSHOTS}/<digest>/files/..., or drop --in-snapshot")


def taken_of(snapshot: Snapshot) -> Path:
    """The directory the snapshot was taken of (where its workdir's original is, on the machine that took it)."""
    top = Path(json.loads((snapshot.root / MANIFEST).read_text()).get("top") or snapshot.files)
    return top / snapshot.workdir.relative_to(snapshot.files)


def read_manifest(snapshot: Snapshot) -> dict:
    """The snapshot's snapshot.json, and its diff (`diff`, empty when clean)."""
    manifest = json.loads((snapshot.root / MANIFEST).read_text())
    diff = snapshot.root / DIFF
    return {**manifest, "diff": diff.read_text() if diff.is_file() else ""}


@dataclass(frozen=True)
class JobCode:
    """A job's code: the snapshot its ranks run in, and the directory it was submitted from (where its data is)."""

    snapshot: Snapshot
    submit_dir: Path  # absolute

    def environment(self) -> dict[str, str]:
        """What every rank is told: where it was submitted from, and the snapshot it runs."""
        return {"HPC_TRAIN_SUBMIT_DIR": str(self.submit_dir), "HPC_TRAIN_SNAPSHOT": str(self.snapshot.root)}

    def tree_path(self, path: Path) -> Path | None:
        """An absolute path's copy in the snapshot, when it is in the tree snapshotted; else None (pure)."""
        depth = len(self.snapshot.workdir.relative_to(self.snapshot.files).parts)
        top = self.submit_dir.parents[depth - 1] if depth else self.submit_dir
        return self.snapshot.files / path.relative_to(top) if path.is_relative_to(top) else None
