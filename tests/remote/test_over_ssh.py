"""Remotes against a real sshd, from a "laptop" whose PATH holds only ssh, rsync and python: remote check, each
bad remote's one-line error (fast), a verb forwarded with hostile values, pull. No Slurm needed."""

from __future__ import annotations

import json
import shlex
import sys
import time
from pathlib import Path

import pytest

from hpc_train import PROTOCOL, __version__, version_line
from tests.sshd import CLOSED, GOOD, STRANGER, SshServer, hpc_train, laptop_env


@pytest.fixture
def laptop(sshd: SshServer, tmp_path: Path) -> dict[str, str]:
    return laptop_env(sshd, tmp_path / "home")


def add(env: dict[str, str], name: str, host: str, workdir: Path | str, setup: str) -> None:
    added = hpc_train(env, "remote", "add", name, "--host", host, "--workdir", str(workdir), "--setup", setup,
                      cwd=Path(env["HOME"]))
    assert added.returncode == 0, added.stderr


def one_line_error(result: object, *words: str) -> str:
    stderr = result.stderr.strip()  # type: ignore[attr-defined]
    assert result.returncode != 0 and len(stderr.splitlines()) == 1, stderr  # type: ignore[attr-defined]
    assert all(word in stderr for word in words), stderr
    return stderr


def fake_commands(folder: Path, **scripts: str) -> Path:
    """A folder of executable shell scripts, a name each (for a remote's PATH)."""
    folder.mkdir()
    for name, body in scripts.items():
        (folder / name).write_text(f"#!/bin/sh\n{body}")
        (folder / name).chmod(0o755)
    return folder


def test_remote_check_says_each_thing_it_checked_on_a_line(sshd: SshServer, laptop: dict[str, str],
                                                           tmp_path: Path) -> None:
    fake_slurm = fake_commands(tmp_path / "slurm-bin", sinfo="[ \"$1\" = --version ] && echo 'slurm 22.05.8'\nexit 0\n")
    add(laptop, "c", GOOD, tmp_path / "work", sshd.setup() + f"; export PATH={fake_slurm}:$PATH")
    checked = hpc_train(laptop, "remote", "check", "c", cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    lines = checked.stdout.splitlines()
    assert [line[:4] for line in lines] == ["ok  "] * 4, lines
    assert lines[0].startswith(f"ok   reachable: {GOOD} (")
    assert lines[1] == (f"ok   hpc-train {__version__} on login, protocol {PROTOCOL} (here {__version__}, protocol "
                        f"{PROTOCOL})")
    assert lines[2] == "ok   Slurm: slurm 22.05.8 answers"
    assert lines[3] == f"ok   workdir writable: {tmp_path / 'work'}" and (tmp_path / "work").is_dir()


def test_remote_check_fails_where_slurm_does_not_answer_and_says_it(sshd: SshServer, laptop: dict[str, str],
                                                                       tmp_path: Path) -> None:
    silent = fake_commands(tmp_path / "slurm-bin",
                           sinfo="[ \"$1\" = --version ] && echo 'slurm 22.05.8' && exit 0\n"
                                 "echo 'slurm_load_partitions: Unable to contact slurm controller' >&2; exit 1\n")
    add(laptop, "c", GOOD, tmp_path / "work", sshd.setup() + f"; export PATH={silent}:$PATH")
    checked = hpc_train(laptop, "remote", "check", "c", cwd=tmp_path)
    assert checked.returncode == 1
    assert ("FAIL Slurm: does not answer on login after --setup (slurm 22.05.8: slurm_load_partitions: Unable to "
            "contact slurm controller)") in checked.stdout, checked.stdout


def test_an_unknown_remote_is_refused_naming_the_known_ones(laptop: dict[str, str], tmp_path: Path) -> None:
    add(laptop, "c", GOOD, "/w", "")
    result = hpc_train(laptop, "status", "--remote", "nope", cwd=tmp_path)
    one_line_error(result, "unknown remote 'nope' (known: c)", "hpc-train remote add nope")


def test_a_closed_port_fails_at_once_in_one_line(laptop: dict[str, str], tmp_path: Path) -> None:
    add(laptop, "c", CLOSED, "/w", "")
    started = time.monotonic()
    result = hpc_train({**laptop, "HPC_TRAIN_REMOTE": "c"}, "list", cwd=tmp_path)
    assert time.monotonic() - started < 5
    one_line_error(result, "closed cannot be reached", "Connection refused", "check that `ssh -F")


def test_an_unknown_host_key_is_refused_with_the_ssh_to_run_once(sshd: SshServer, laptop: dict[str, str],
                                                                 tmp_path: Path) -> None:
    add(laptop, "c", STRANGER, "/w", "")
    result = hpc_train(laptop, "status", "--remote", "c", cwd=tmp_path)
    one_line_error(result, "stranger: host key unknown or changed, refused",
                   f"run `ssh -F {sshd.client_config} stranger` once")


def test_hpc_train_missing_on_the_remote_is_one_line(laptop: dict[str, str], tmp_path: Path) -> None:
    add(laptop, "c", GOOD, tmp_path / "work", "export PATH=/usr/bin:/bin")
    result = hpc_train(laptop, "list", "--remote", "c", cwd=tmp_path)
    one_line_error(result, "hpc-train not found on login after --setup", "source ~/venvs/hpc/bin/activate")


def test_remote_check_names_the_slurm_call_that_did_not_answer_within_its_bound(
        sshd: SshServer, laptop: dict[str, str], tmp_path: Path) -> None:
    """A Slurm that retries (SLURM_CONF naming a missing file) keeps sinfo busy: named after the bound, not ssh."""
    slow = fake_commands(tmp_path / "slurm-bin",
                         sinfo="[ \"$1\" = --version ] && echo 'slurm 22.05.8' && exit 0\nexec sleep 60\n")
    add(laptop, "c", GOOD, tmp_path / "work", sshd.setup() + f"; export PATH={slow}:$PATH")
    started = time.monotonic()
    checked = hpc_train({**laptop, "HPC_TRAIN_REMOTE_SLURM_TIMEOUT": "2"}, "remote", "check", "c", cwd=tmp_path)
    assert time.monotonic() - started < 20 and checked.returncode == 1, checked.stdout + checked.stderr
    assert ("FAIL Slurm: `sinfo -h -o %P` did not answer within 2 s on login after --setup (ssh is fine); check "
            "SLURM_CONF and that slurmctld answers there") in checked.stdout.splitlines(), checked.stdout
    assert "ssh login` works" not in checked.stdout and checked.stdout.startswith("ok   reachable: login")


def test_a_login_node_too_old_to_submit_is_one_line_before_anything_is_copied(
        sshd: SshServer, laptop: dict[str, str], tmp_path: Path) -> None:
    """The old build of issue 36: it says 0.1.0 and no protocol, and knows no `submit --in-snapshot`. The laptop says
    so, and how to upgrade it there, before a snapshot is taken or copied; verbs that need no protocol still run."""
    old = fake_commands(tmp_path / "old-bin", **{"hpc-train": "echo 'hpc-train 0.1.0'\n"})
    work, here = tmp_path / "work", tmp_path / "laptop"
    here.mkdir()
    (here / "train.py").write_text("print('hi')\n")
    setup = f"export PATH={old}:$PATH"
    add(laptop, "c", GOOD, work, setup)
    result = hpc_train(laptop, "submit", "--remote", "c", "--nodes", "1", "--", "python", "train.py", cwd=here)
    one_line_error(result, f"hpc-train 0.1.0 on login is older than this one ({__version__}): it speaks no protocol, "
                   f"submit --remote needs protocol 1; upgrade it there: ssh -F {laptop['HPC_TRAIN_SSH_CONFIG']} "
                   f"login {shlex.quote(setup + ' && pip install --upgrade hpc-train')}")
    assert not (work / "runs").exists() and not (here / "runs").exists()
    listed = hpc_train(laptop, "list", "--remote", "c", cwd=here)
    assert listed.returncode == 0 and listed.stdout == "hpc-train 0.1.0\n", listed.stderr
    checked = hpc_train(laptop, "remote", "check", "c", cwd=here)
    assert checked.returncode == 1 and "FAIL hpc-train 0.1.0 on login is older than this one" in checked.stdout


def test_a_workdir_that_cannot_be_written_is_one_line(sshd: SshServer, laptop: dict[str, str],
                                                      tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")  # (root writes anywhere: a folder under a file cannot be made)
    add(laptop, "c", GOOD, tmp_path / "a-file" / "work", sshd.setup())
    result = hpc_train(laptop, "list", "--remote", "c", cwd=tmp_path)
    one_line_error(result, f"workdir {tmp_path / 'a-file' / 'work'} on login cannot be written", "Not a directory")


def says_its_argv(tmp_path: Path) -> Path:
    """A folder holding a stand-in `hpc-train` that prints its argv, its folder and $HPC_TRAIN_REMOTE as JSON."""
    stand_in = tmp_path / "stand-in"
    stand_in.mkdir()
    (stand_in / "hpc-train").write_text(
        f"#!{sys.executable}\nimport json, os, sys\nif sys.argv[1:] == ['--version']: print({version_line()!r})\n"
        "else: print(json.dumps([sys.argv[1:], os.getcwd(), os.environ.get('HPC_TRAIN_REMOTE')]))\n")
    (stand_in / "hpc-train").chmod(0o755)
    return stand_in


def test_a_verb_runs_in_the_workdir_there_with_hostile_values_intact(sshd: SshServer, laptop: dict[str, str],
                                                                     tmp_path: Path) -> None:
    """`report --remote` reaches the remote's hpc-train (here a stand-in that says its argv and folder) with every
    value whole, in a workdir whose name is hostile, and without --remote."""
    stand_in = says_its_argv(tmp_path)
    work = tmp_path / "it's $(touch pwned) work"
    add(laptop, "c", GOOD, work, f"export PATH={shlex.quote(str(stand_in))}:$PATH")
    hostile = ["1; touch pwned", "$(touch pwned)", "a'b\"c", "*"]
    result = hpc_train({**laptop, "HPC_TRAIN_REMOTE": "c"}, "report", hostile[0], "--objective", hostile[1],
                       cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [["report", hostile[0], "--objective", hostile[1]], str(work), ""]
    result = hpc_train(laptop, "logs", hostile[2], "--rem", "c", "--rank", "1", cwd=tmp_path)
    assert json.loads(result.stdout)[0] == ["logs", hostile[2], "--rank", "1"], result.stderr
    assert not list(tmp_path.rglob("pwned")) and not (Path.home() / "pwned").exists()


def test_pull_copies_a_sweeps_run_folders_into_runs_here(sshd: SshServer, laptop: dict[str, str],
                                                         tmp_path: Path) -> None:
    work = tmp_path / "work"
    for folder in ("sw-41", "sw-41_0", "sw-41_1", "other-411", "sw-42"):
        (work / "runs" / folder / "logs").mkdir(parents=True)
        (work / "runs" / folder / "metrics.json").write_text(json.dumps({"folder": folder}))
    add(laptop, "c", GOOD, work, sshd.setup())
    here = tmp_path / "laptop"
    here.mkdir()
    pulled = hpc_train(laptop, "pull", "41", "--remote", "c", cwd=here)
    assert pulled.returncode == 0, pulled.stderr
    assert sorted(path.name for path in (here / "runs").iterdir()) == ["sw-41", "sw-41_0", "sw-41_1"]
    assert json.loads((here / "runs" / "sw-41_1" / "metrics.json").read_text()) == {"folder": "sw-41_1"}
    missing = hpc_train(laptop, "pull", "43", "--remote", "c", cwd=here)
    one_line_error(missing, "no run folder of job 43", "hpc-train list --remote c")


def test_submit_copies_the_snapshot_and_submits_from_its_copy_there(sshd: SshServer, laptop: dict[str, str],
                                                                    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    capfd: pytest.CaptureFixture[str]) -> None:
    """The laptop's side of submit --remote, whatever the snapshot holds: its folder arrives under the workdir's
    runs/snapshots/, and the remote's hpc-train submits --in-snapshot from the submit folder's copy, without
    this side's options. (The real snapshot, end to end: tests/e2e/test_remote.py.)"""
    from hpc_train.cli import main
    from hpc_train.remote import snapshots

    here, work = tmp_path / "laptop", tmp_path / "work"
    root = here / "runs" / "snapshots" / "d1g35t"
    (root / "files" / "sub").mkdir(parents=True)
    (root / "files" / "sub" / "train.py").write_text("print('hi')\n")
    (root / "snapshot.json").write_text("{}")
    taken = []
    monkeypatch.setattr(snapshots, "snapshot_here", lambda folder, exclude, limit: taken.append(list(exclude)) or (
        "d1g35t", root, "sub"))
    for name, value in laptop.items():
        if name != "PATH":
            monkeypatch.setenv(name, value)
    monkeypatch.chdir(here)
    add(laptop, "c", GOOD, work, f"export PATH={says_its_argv(tmp_path)}:$PATH")
    code = main(["submit", "--nodes", "1", "--remote", "c", "--name", "a b", "--", "python", "train.py", "$HOME"])
    argv, folder, _ = json.loads(capfd.readouterr().out)
    assert code == 0 and taken == [[]]
    assert argv == ["submit", "--in-snapshot", "--nodes", "1", "--name", "a b", "--", "python", "train.py", "$HOME"]
    assert folder == str(work / "runs" / "snapshots" / "d1g35t" / "files" / "sub")
    assert (work / "runs" / "snapshots" / "d1g35t" / "snapshot.json").is_file()


def ssh_clients(env: dict[str, str]) -> list[str]:
    """The ssh clients of this laptop's shared connections still running (not the connections' masters, which
    persist by design: `ssh: PATH [mux]`)."""
    from hpc_train.remote.ssh import control_folder

    folder, found = str(control_folder(env)), []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        words = [word.decode(errors="replace") for word in argv if word]
        if words and Path(words[0]).name == "ssh" and any(folder in word for word in words):
            found.append(" ".join(words))
    return found


def a_cluster(tmp_path: Path, name: str, start: str, job: str, version: str = version_line()) -> str:
    """A remote's --setup for a stand-in cluster `name`: its sbatch --test-only says `start` (or, for "silent",
    sleeps; for "refuses", refuses), its hpc-train submits job `job` (recorded in submitted.txt) and answers other
    verbs with [argv, name] as JSON."""
    folder = tmp_path / f"cluster-{name}"
    answer = {"silent": "exec sleep 60",
              "refuses": "echo 'sbatch: error: Batch job submission failed: Invalid partition name specified' >&2; "
                         "exit 1"}.get(start, f"echo 'sbatch: Job 9 to start at {start} using 1 processors on nodes "
                                              "node1 in partition debug' >&2")
    fake_commands(folder, sbatch=f'[ "$1" = --test-only ] || exit 3\n{answer}\n', **{"hpc-train": (
        f"exec {sys.executable} -c {shlex.quote(stand_in(version))} {shlex.quote(name)} {job} {folder} \"$@\"\n")})
    return f"export PATH={folder}:$PATH"


def stand_in(version: str) -> str:
    return (f"import json, sys\nname, job, folder, *argv = sys.argv[1:]\n"
            f"if argv == ['--version']: print({version!r})\n"
            "elif argv[:1] == ['submit']:\n"
            "    open(folder + '/submitted.txt', 'a').write(json.dumps(argv) + '\\n')\n"
            "    print(job); print('hpc-train submit: job ' + job + ' on ' + name, file=sys.stderr)\n"
            "else: print(json.dumps([argv, name]))\n")


def test_submit_to_the_earliest_of_several_clusters_then_follow_the_job_there(
        sshd: SshServer, laptop: dict[str, str], tmp_path: Path) -> None:
    """(issue 37, 3) a is busy (its start is later), c never answers: b gets the job; every estimate on one stderr
    line, stdout the id alone; then status, cancel, pull and list follow it to b without --remote."""
    env = {**laptop, "HPC_TRAIN_SSH_TIMEOUT": "5", "HPC_TRAIN_REMOTE_SLURM_TIMEOUT": "3"}
    for name, start, job in (("a", "2026-11-26T09:00:00", "1111"), ("b", "2026-11-26T04:00:00", "2222"),
                             ("c", "silent", "3333")):
        add(env, name, GOOD, tmp_path / f"work-{name}", a_cluster(tmp_path, name, start, job))
    here = tmp_path / "laptop"
    here.mkdir()
    started = time.monotonic()
    result = hpc_train(env, "submit", "--remote", "a,b,c", "--nodes", "1", "--no-snapshot", "--", "python", "t.py",
                       cwd=here)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "2222\n" and time.monotonic() - started < 40
    assert ssh_clients(env) == []  # (issue 46, 5) c's, left waiting on its silent sbatch, ended with hpc-train
    assert result.stderr.splitlines() == [
        "hpc-train submit: remote c skipped: did not answer within 8 s",
        "hpc-train: earliest start: a 2026-11-26T09:00, b 2026-11-26T04:00 (chosen), c did not answer in 8 s",
        "hpc-train submit: job 2222 on b"]
    [submitted] = (tmp_path / "cluster-b" / "submitted.txt").read_text().splitlines()
    assert json.loads(submitted) == ["submit", "--no-snapshot", "--nodes", "1", "--", "python", "t.py"]
    assert not (tmp_path / "cluster-a" / "submitted.txt").exists()
    for verb in ("status", "cancel"):
        followed = hpc_train(env, verb, "2222", cwd=here)
        assert json.loads(followed.stdout) == [[verb, "2222"], "b"], followed.stderr
    assert json.loads(hpc_train(env, "status", "2222", "--remote", "a", cwd=here).stdout) == [["status", "2222"], "a"]
    among = hpc_train({**env, "HPC_TRAIN_REMOTE": "a,b"}, "logs", "2222_1", cwd=here)  # of several: where it went
    assert json.loads(among.stdout) == [["logs", "2222_1"], "b"], among.stderr
    (tmp_path / "work-b" / "runs" / "t-2222").mkdir(parents=True)
    pulled = hpc_train(env, "pull", "2222", cwd=here)
    assert pulled.returncode == 0 and (here / "runs" / "t-2222").is_dir(), pulled.stderr
    listed = hpc_train(env, "list", cwd=here).stdout.splitlines()
    at = [index for index, line in enumerate(listed) if line.startswith("sent from here")]
    assert at and listed[at[0] + 1].split()[:2] == ["2222", "b"], listed


def test_several_remotes_none_of_which_can_run_it_queue_nothing(sshd: SshServer, laptop: dict[str, str],
                                                                tmp_path: Path) -> None:
    add(laptop, "d", GOOD, tmp_path / "work-d", a_cluster(tmp_path, "d", "refuses", "4444"))
    add(laptop, "down", CLOSED, "/w", "")
    result = hpc_train(laptop, "submit", "--remote", "d,down", "--nodes", "1", "--no-snapshot", cwd=tmp_path)
    one_line_error(result, "no remote gave a start for this request, nothing queued: d skipped: Slurm would not run "
                   "it there (Batch job submission failed: Invalid partition name specified); down skipped: closed "
                   "cannot be reached")
    assert result.stdout == "" and not (tmp_path / "cluster-d" / "submitted.txt").exists()


@pytest.mark.parametrize("argv, words", [
    (["submit", "--remote", "d,nosuch", "--nodes", "1"], "unknown remote 'nosuch' (known: d, e)"),
    (["submit", "--remote", "nosuch", "--nodes", "1"], "unknown remote 'nosuch' (known: d, e)"),
    (["status", "5", "--remote", "d,d2"], "unknown remote 'd2'"),
    (["status", "5", "--remote", "d,e"], "--remote d,e: only submit chooses among several remotes; name one"),
])
def test_a_remote_list_naming_an_unknown_remote_is_one_line(argv: list[str], words: str, laptop: dict[str, str],
                                                            tmp_path: Path) -> None:
    add(laptop, "d", GOOD, tmp_path / "work-d", "")
    add(laptop, "e", GOOD, tmp_path / "work-e", "")
    one_line_error(hpc_train(laptop, *argv, cwd=tmp_path), words)


def test_a_login_node_too_old_for_a_partition_list_is_skipped_with_its_reason(
        sshd: SshServer, laptop: dict[str, str], tmp_path: Path) -> None:
    """Protocol 2 (issue 37): a login node of protocol 1 would take `--partition a,b` for one unknown partition."""
    add(laptop, "old", GOOD, tmp_path / "work-old", a_cluster(tmp_path, "old", "2026-11-26T01:00:00", "5555",
                                                              "hpc-train 0.2 (protocol 1, oldest 1)"))
    add(laptop, "new", GOOD, tmp_path / "work-new", a_cluster(tmp_path, "new", "2026-11-26T09:00:00", "6666"))
    result = hpc_train(laptop, "submit", "--remote", "all", "--nodes", "1", "--partition", "x,y", "--no-snapshot",
                       cwd=tmp_path)
    assert result.returncode == 0 and result.stdout == "6666\n", result.stderr
    skipped, line, _ = result.stderr.splitlines()
    assert skipped.startswith("hpc-train submit: remote old skipped: hpc-train 0.2 on login is older than this one")
    assert "submit --partition A,B --remote needs protocol 2" in skipped
    assert line == "hpc-train: earliest start: new 2026-11-26T09:00 (chosen), old skipped"
