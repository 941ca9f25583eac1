"""The remotes' pure parts: remotes.yaml, the ssh argv, ssh's failures in one line, the shell lines (the probe's
bound on Slurm through a real shell), the protocol rule, the options a forwarded verb drops."""

from __future__ import annotations

import shlex
import subprocess
import time
from pathlib import Path

import pytest

from hpc_train.cli import main
from hpc_train.cli.forwarding import SUBMIT_OPTIONS_HERE, forwarded, without
from hpc_train.errors import HpcTrainError
from hpc_train import OLDEST_PROTOCOL, PROTOCOL, __version__, version_line
from hpc_train.remote import config, scripts, ssh
from hpc_train.remote.config import Remote
from hpc_train.remote.protocol import Build, parse_version_line, protocol_problem

ENV = {"HOME": "/home/u", "XDG_RUNTIME_DIR": "/run/user/1"}


def test_remotes_yaml_round_trips_and_lives_under_xdg_config_home(tmp_path: Path) -> None:
    remotes = {"a": Remote("a", "login.example.org", "~/hpc", "source ~/v/bin/activate"), "b": Remote("b", "u@h", "/w")}
    environ = {"XDG_CONFIG_HOME": str(tmp_path)}
    assert config.save(remotes, environ) == tmp_path / "hpc-train" / "remotes.yaml"
    assert config.load(environ) == remotes
    assert config.config_file({"HOME": "/home/u"}) == Path("/home/u/.config/hpc-train/remotes.yaml")


@pytest.mark.parametrize("fields, words", [
    (("a b", "h", "/w"), "remote name 'a b'"), (("a", "-oProxyCommand=x", "/w"), "--host '-oProxyCommand=x'"),
    (("a", "h x", "/w"), "without spaces"), (("a", "h", "w"), "--workdir 'w': give an absolute path"),
    (("a", "h", "/w", "a\nb"), "--setup: one line"),
])
def test_a_bad_remote_is_refused_naming_the_field(fields: tuple[str, ...], words: str) -> None:
    with pytest.raises(HpcTrainError) as refused:
        Remote(*fields)
    assert words in str(refused.value) and "\n" not in str(refused.value)


def test_a_remotes_yaml_that_is_not_ours_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(HpcTrainError, match="expected `remotes:`"):
        config.parse("- a list\n", "f.yaml")
    with pytest.raises(HpcTrainError, match="f.yaml: --workdir 'rel'"):
        config.parse("remotes:\n  a: {host: h, workdir: rel}\n", "f.yaml")


def test_remote_add_list_remove_through_the_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert main(["remote", "add", "c", "--host", "login", "--workdir", "/w", "--setup", "export A=1"]) == 0
    assert main(["remote", "add", "c", "--host", "login", "--workdir", "/w"]) == 2
    assert "remote 'c' exists; hpc-train remote remove c first" in capsys.readouterr().err
    assert main(["remote", "list"]) == 0
    assert capsys.readouterr().out == "c\tlogin\t/w\tsetup: export A=1\n"
    assert main(["remote", "remove", "c"]) == 0 and config.load({"XDG_CONFIG_HOME": str(tmp_path)}) == {}
    assert main(["remote", "remove", "c"]) == 2
    assert "unknown remote 'c' (known: none yet)" in capsys.readouterr().err


def test_every_ssh_shares_one_connection_asks_nothing_and_never_skips_host_keys() -> None:
    argv = ssh.ssh_argv("login", "true", {**ENV, ssh.ENV_CONFIG: "/c", ssh.ENV_TIMEOUT: "3"})
    assert argv[:3] == ["ssh", "-F", "/c"] and argv[-3:] == ["--", "login", "true"]
    options = set(argv[4::2][:5])
    assert options == {"ControlMaster=auto", "ControlPath=/run/user/1/hpc-train/cm-%C", "ControlPersist=10m",
                       "BatchMode=yes", "ConnectTimeout=3"}
    assert {"ServerAliveInterval=5", "ServerAliveCountMax=3"} <= set(argv[4::2])  # a silent node: dropped in 15 s
    rsync = ssh.rsync_argv(["a/"], "login:b/", ENV)
    assert rsync[:3] == ["rsync", "-a", "-s"] and "ControlMaster=auto" in rsync[rsync.index("-e") + 1]
    assert not any("stricthostkeychecking" in word.lower() for word in argv + rsync)
    assert str(ssh.control_folder({"HOME": "/home/u"})) == "/home/u/.cache/hpc-train"
    with pytest.raises(HpcTrainError, match="HPC_TRAIN_SSH_TIMEOUT='soon': give whole seconds"):
        ssh.ssh_options({ssh.ENV_TIMEOUT: "soon"})
    assert ssh.slurm_timeout({}) == ssh.SLURM_TIMEOUT and ssh.slurm_timeout({ssh.ENV_SLURM_TIMEOUT: "2"}) == 2
    with pytest.raises(HpcTrainError, match="HPC_TRAIN_REMOTE_SLURM_TIMEOUT='0': give whole seconds, e.g. 15"):
        ssh.slurm_timeout({ssh.ENV_SLURM_TIMEOUT: "0"})


@pytest.mark.parametrize("stderr, words", [
    ("Host key verification failed.\n", "host key unknown or changed, refused; run `ssh h` once"),
    ("ssh: connect to host h port 22: Connection timed out\n", "h cannot be reached: ssh: connect to host h port 22"),
    ("ssh: Could not resolve hostname h: Name or service not known\n", "h cannot be reached"),
    ("root@h: Permission denied (publickey).\n", "h refused the login (root@h: Permission denied (publickey).)"),
    ("mux_client_request_session: read from master failed\n", "ssh h failed: mux_client"),
])
def test_sshs_failures_read_as_one_line_with_the_fix(stderr: str, words: str) -> None:
    message = str(ssh.failure("h", stderr, {}))
    assert words in message and "\n" not in message


def test_the_version_line_says_the_protocol_and_a_build_before_protocols_has_none() -> None:
    assert parse_version_line(version_line()) == Build(__version__, PROTOCOL, OLDEST_PROTOCOL)
    assert parse_version_line("hpc-train 0.1.0") == Build("0.1.0", None, 0)
    assert parse_version_line("hpc-train 0.2.dev3+gabc (protocol 4, oldest 2)") == Build("0.2.dev3+gabc", 4, 2)
    assert parse_version_line("hpc-train 2.0 (protocol 9, oldest 5, jobs 3)") == Build("2.0", 9, 5)  # says more
    assert parse_version_line("ModuleNotFoundError: No module named 'yaml'") is None
    assert parse_version_line("hpc-train is not a command here") is None
    remote = Remote("c", "h", "/w")
    assert scripts.build_problem(remote, "hpc-train 0.1.0") is None
    assert "does not start after --setup: ModuleNotFoundError" in (
        scripts.build_problem(remote, "ModuleNotFoundError: x") or "")
    assert "hpc-train not found on h after --setup" in (scripts.build_problem(remote, None) or "")
    assert scripts.parse_probe("workdir=ok\nsetup=ok\nversion=hpc-train 0.1.2\n").version == "hpc-train 0.1.2"
    assert scripts.parse_probe("workdir=ok\nsetup=ok\nversion=\n").version is None


def test_the_older_side_is_named_with_its_upgrade_in_one_line() -> None:
    remote = Remote("c", "login", "/w", "source ~/venvs/hpc/bin/activate;")
    here = Build("0.1.dev9+g1", 1, 1)
    old = protocol_problem(remote, Build("0.1.0", None), here, "submit", {ssh.ENV_CONFIG: "/my config"}) or ""
    assert old == ("hpc-train 0.1.0 on login is older than this one (0.1.dev9+g1): it speaks no protocol, submit "
                   "--remote needs protocol 1; upgrade it there: ssh -F '/my config' login 'source "
                   "~/venvs/hpc/bin/activate && pip install --upgrade hpc-train'")
    assert protocol_problem(remote, Build("0.1.0", None), here, "status", {}) is None  # status needs none
    assert protocol_problem(Remote("c", "login", "/w"), Build("0.1.0", 0), here, "submit", {}).endswith(
        "protocol 0, submit --remote needs protocol 1; upgrade it there: ssh login 'pip install --upgrade hpc-train'")
    newer = protocol_problem(remote, Build("0.9", 7, 3), here, "status", {}) or ""
    assert newer == ("this hpc-train (0.1.dev9+g1, protocol 1) is older than hpc-train 0.9 on login, which serves "
                     "protocol 3 and newer; upgrade it here: pip install --upgrade hpc-train")
    assert protocol_problem(remote, Build("0.9", 7, 1), here, "submit", {}) is None
    partitions = protocol_problem(remote, Build("0.9", 1, 1), here, "submit --partition A,B", {}) or ""
    assert "it speaks protocol 1, submit --partition A,B --remote needs protocol 2; upgrade it there" in partitions
    assert protocol_problem(remote, Build("0.9", 1, 1), here, "submit", {}) is None  # (issue 37: a list needs 2)
    job_log = protocol_problem(remote, Build("0.9", 2, 1), here, "logs --job", {}) or ""
    assert "it speaks protocol 2, logs --job --remote needs protocol 3; upgrade it there" in job_log
    assert protocol_problem(remote, Build("0.9", 2, 1), here, "logs", {}) is None  # (issue 46: --job needs 3)


@pytest.mark.parametrize("sinfo, key", [
    ("exec sleep 30", "slurm_silent=sinfo -h -o %P"),  # a Slurm that retries: named, within the bound
    ("echo 'Unable to contact slurm controller' >&2; exit 1", "slurm_failed=slurm 22.05.8: Unable to contact"),
    ("echo p1", "slurm=slurm 22.05.8"),
])
def test_the_probe_bounds_each_slurm_call_through_a_real_shell(sinfo: str, key: str, tmp_path: Path) -> None:
    bin_dir = tmp_path / "b"
    bin_dir.mkdir()
    (bin_dir / "sinfo").write_text(f"#!/bin/sh\n[ \"$1\" = --version ] && echo 'slurm 22.05.8' && exit 0\n{sinfo}\n")
    (bin_dir / "sinfo").chmod(0o755)
    remote = Remote("c", "h", str(tmp_path / "it's $(touch pwned) w"), f"export PATH={bin_dir}:$PATH")
    started = time.monotonic()
    said = subprocess.run(["sh", "-c", scripts.probe_script(remote, slurm_seconds=1)], capture_output=True,
                          text=True, cwd=tmp_path, timeout=20).stdout
    assert time.monotonic() - started < 6 and key in said, said
    probe = scripts.parse_probe(said)
    assert probe.workdir == "ok" and probe.setup_ok and not list(tmp_path.rglob("pwned"))
    ok, line = scripts.slurm_line(remote, probe, 1)
    assert ok == key.startswith("slurm=")
    if "silent" in key:
        assert line == ("Slurm: `sinfo -h -o %P` did not answer within 1 s on h after --setup (ssh is fine); check "
                        "SLURM_CONF and that slurmctld answers there")


@pytest.mark.parametrize("body, version", [
    (f"echo {shlex.quote(version_line())}", version_line()),
    ("exec sleep 30", "hpc-train --version did not answer within 1 s"),
])
def test_the_probe_bounds_hpc_trains_version_call_through_a_real_shell(body: str, version: str,
                                                                      tmp_path: Path) -> None:
    """(issue 46, 5) `hpc-train --version` on a login node was not bounded in time."""
    bin_dir = tmp_path / "b"
    bin_dir.mkdir()
    (bin_dir / "hpc-train").write_text(f"#!/bin/sh\n{body}\n")
    (bin_dir / "hpc-train").chmod(0o755)
    remote = Remote("c", "h", str(tmp_path / "w"), f"export PATH={bin_dir}:$PATH")
    said = subprocess.run(["sh", "-c", scripts.probe_script(remote, version_seconds=1)], capture_output=True,
                          text=True, cwd=tmp_path, timeout=20).stdout
    probe = scripts.parse_probe(said)
    assert probe.version == version, said
    if "did not answer" in version:
        assert scripts.build_problem(remote, probe.version) == (
            "hpc-train on h does not start after --setup: hpc-train --version did not answer within 1 s; try it "
            "there (ssh h)")


def test_the_verb_script_keeps_hostile_values_whole_through_a_real_shell(tmp_path: Path) -> None:
    """Run as the login node's shell would: a stand-in hpc-train says its argv; setup exports reach it."""
    work = tmp_path / "w '$(touch pwned)"
    work.mkdir()
    bin_dir = tmp_path / "b"
    bin_dir.mkdir()
    (bin_dir / "hpc-train").write_text("#!/bin/sh\nprintf '%s|' \"$PWD\" \"$SEEN\" \"$@\"\n")
    (bin_dir / "hpc-train").chmod(0o755)
    remote = Remote("c", "h", str(work), f"export PATH={bin_dir}:$PATH SEEN=yes  # a comment")
    hostile = ["status", "1; touch pwned", "`touch pwned`", "a'b"]
    said = subprocess.run(["sh", "-c", scripts.verb_script(remote, hostile)], capture_output=True, text=True,
                          cwd=tmp_path).stdout
    assert said == "|".join([str(work), "yes", *hostile]) + "|"
    assert not list(tmp_path.rglob("pwned"))
    assert scripts.shell_path("~/a b") == "\"$HOME\"/'a b'" and scripts.rsync_path("~/a b") == "a b"


def test_a_forwarded_verb_drops_the_options_of_this_side_only() -> None:
    options = ["submit", "--nodes", "1", "--remote", "c", "--no-snapshot", "--snapshot-exclude=*.ckpt",
               "--snapshot-ex", "data", "--name", "--remote-ish"]
    assert forwarded(options, "submit", ["python", "--remote", "x"], SUBMIT_OPTIONS_HERE) == [
        "submit", "--nodes", "1", "--name", "--remote-ish", "--", "python", "--remote", "x"]
    assert without(["status", "--rem=c", "12"], {"--remote": True}) == ["status", "12"]
    slurms = ["--after", "12", "--sbatch", "mail-user=a@b.c", "--sbatch=exclude=n1", "--dependency", "singleton"]
    assert forwarded(["submit", "--remote", "c", *slurms], "submit", None, SUBMIT_OPTIONS_HERE) == ["submit", *slurms]
    assert without(["status", "--re", "12"], {"--remote": True}) == ["status", "--re", "12"]


def test_submit_remote_refuses_output_dir_in_one_line() -> None:
    import argparse

    from hpc_train.cli.forwarding import _submit

    args = argparse.Namespace(local=False, output_dir=Path("elsewhere"), snapshot_limit_mb=1.0)
    with pytest.raises(HpcTrainError, match=r"^--output-dir with --remote: .*drop it$"):
        _submit(args, Remote("r", "host", "~/w"), ["submit", "--output-dir", "elsewhere"], {})


def test_the_remote_snapshot_takes_the_snapshot_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hpc_train.remote import snapshots

    (tmp_path / "big.bin").write_bytes(b"x" * 4096)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(HpcTrainError, match="over its"):
        snapshots.snapshot_here(tmp_path, [], 1024)


def test_a_snapshot_push_makes_its_folder_with_mkdir_not_rsync_mkpath(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from hpc_train.remote import transfer

    calls: list[object] = []
    monkeypatch.setattr(transfer, "connect", lambda remote, environ, verb: calls.append(verb))
    monkeypatch.setattr(transfer, "ask", lambda remote, script, environ: calls.append(script) or
                        subprocess.CompletedProcess([], 0, "", ""))
    monkeypatch.setattr(transfer.subprocess, "run", lambda argv, **kw: calls.append(argv) or
                        subprocess.CompletedProcess(argv, 0, "", ""))
    there = transfer.push_snapshot(Remote("r", "host", "~/my work"), tmp_path, "d1g", {})
    assert calls[0] == "submit"  # checked: the remote's hpc-train can submit it, before anything is copied
    assert calls[1] == "mkdir -p -- \"$HOME\"/'my work/runs/snapshots/d1g'" and there.endswith("snapshots/d1g")
    assert calls[2][0] == "rsync" and not any(str(arg).startswith("--mkpath") for arg in calls[2])
    monkeypatch.undo()  # a real shell makes a hostile path
    made = tmp_path / "a b" / "c"
    subprocess.run(["sh", "-c", scripts.mkdir_script(str(made))], check=True)
    assert made.is_dir()


def test_remotes_yaml_is_written_then_renamed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hpc_train.runs import state

    written: list[Path] = []
    real = state.write_text_atomically
    monkeypatch.setattr(state, "write_text_atomically", lambda path, text: written.append(path) or real(path, text))
    path = config.save({"c": Remote("c", "host", "~/w")}, {"XDG_CONFIG_HOME": str(tmp_path)})
    assert written == [path] and config.load({"XDG_CONFIG_HOME": str(tmp_path)})["c"].host == "host"
