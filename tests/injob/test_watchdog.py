"""The hang watchdog: its pure decision, failures.py reading its note, and the job body ending a hung step."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from hpc_train.injob import watchdog
from hpc_train.injob.body import JobBody, run_job
from hpc_train.injob.failures import diagnose
from hpc_train.injob.watchdog import Beats, is_hung, threshold_seconds
from hpc_train.runs import attempts, stacks


@pytest.fixture(autouse=True)
def sigterm_as_it_was() -> object:
    """The body's epilogue ignores SIGTERM to its end (a requeue's TERM follows): not in the tests after."""
    import signal

    before = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, before)


def beats(*times: float, started: float = 0.0) -> Beats:
    seen = Beats(started)
    for moment in times:
        seen = seen.beat(moment)
    return seen


def test_before_the_first_beat_the_start_up_allowance_is_added() -> None:
    assert threshold_seconds(None, beats()) == watchdog.FLOOR_SECONDS + watchdog.STARTUP_SECONDS
    assert not is_hung(None, beats(), 600 + 299)
    assert is_hung(None, beats(), 600 + 300)
    assert threshold_seconds(1, beats()) == 60 + watchdog.STARTUP_SECONDS


def test_the_default_follows_the_runs_pace_with_a_floor() -> None:
    fast = beats(10, 11, 12)  # a beat a second after 10 s of start-up: the floor
    assert threshold_seconds(None, fast) == 600
    assert is_hung(None, fast, 12 + 600) and not is_hung(None, fast, 12 + 599)
    slow = beats(100, 1900, 3700)  # 30 minutes between beats: 20 x 30 min
    assert threshold_seconds(None, slow) == 20 * 1800


def test_a_slow_but_moving_run_is_never_a_hang() -> None:
    # Steps of 8 minutes (a beat each), epochs of 10 steps ending in a 40-minute evaluation and checkpoint, for
    # two days, looked at every minute: the pace seen so far always covers the next gap.
    seen, now = Beats(0.0), 0.0
    gaps = ([8 * 60] * 10 + [40 * 60]) * 30
    for gap in gaps:
        for minute in range(1, gap // 60):
            assert not is_hung(None, seen, now + minute * 60), (now, minute)
        now += gap
        seen = seen.beat(now)
    assert threshold_seconds(None, seen) == 20 * 40 * 60


def test_an_explicit_value_wins_and_zero_turns_it_off() -> None:
    slow = beats(100, 1900)
    assert threshold_seconds(2, slow) == 120
    assert is_hung(2, slow, 1900 + 120)
    assert threshold_seconds(0, slow) is None
    assert not is_hung(0, slow, 10**9)


def test_hang_minutes_is_a_setting_of_one_minute_or_more() -> None:
    from hpc_train.config import ConfigError, TrainConfig

    assert TrainConfig(hang_minutes=1).hang_minutes == 1
    assert TrainConfig(hang_minutes=0).hang_minutes == 0
    with pytest.raises(ConfigError, match="hang_minutes"):
        TrainConfig(hang_minutes=0.5)


def test_the_watchdogs_note_is_a_hang_worth_a_retry_whatever_the_ranks_said(tmp_path: Path) -> None:
    attempts.note_failure(tmp_path, "signal", "killed by SIGTERM", environ={"SLURM_PROCID": "0"}, signal="SIGTERM")
    attempts.note_hang(tmp_path, "hung: no progress on any rank for 3 min", 180.0)
    notes = attempts.read_notes(tmp_path)
    failure = diagnose(143, "srun: error: node1: task 0: Terminated\n", notes, ())
    assert (failure.kind, failure.cause, failure.retryable) == ("hung", "hung: no progress on any rank for 3 min",
                                                                True)
    assert failure.blame == ()
    attempts.clear_notes(tmp_path)
    assert attempts.read_notes(tmp_path) == []


def test_the_cause_says_how_long() -> None:
    assert watchdog.hang_cause(181.0) == "hung: no progress on any rank for 3 min"
    assert watchdog.hang_cause(3.2) == "hung: no progress on any rank for 3 s"


def test_top_frames_are_where_the_runs_own_code_waits() -> None:
    dump = ('Thread 0x1 (most recent call first):\n'
            '  File "/usr/lib/python3.11/threading.py", line 327 in wait\n'
            '  File "/home/me/task.py", line 5 in wait_for_the_file_server\n'
            '  File "/home/me/task.py", line 9 in _batches\n'
            '  File "/v/lib/python3.11/site-packages/tensorflow/x.py", line 1 in call\n\n'
            'Current thread 0x2 (most recent call first):\n  File "/h/hpc_train/runs/stacks.py", line 5 in dump\n\n'
            'Thread 0x3 (most recent call first):\n'
            '  File "/v/lib/python3.11/site-packages/tensorflow/execute.py", line 53 in quick_execute\n')
    assert stacks.top_frames(dump, 2) == ['File "/home/me/task.py", line 5 in wait_for_the_file_server',
                                          'File "/home/me/task.py", line 9 in _batches']
    main_only = dump.replace("/home/me/", "/v/lib/python3.11/site-packages/")
    assert stacks.top_frames(main_only, 1) == [
        'File "/v/lib/python3.11/site-packages/tensorflow/execute.py", line 53 in quick_execute']


RANK = """
import os, time
from hpc_train.runs.stacks import answer_requests
answer_requests(os.environ["HPC_TRAIN_RUN_DIR"])
with open(os.path.join(os.environ["HPC_TRAIN_RUN_DIR"], ".heartbeat"), "w"):
    pass
def stuck_waiting_for_data():
    while True:
        time.sleep(0.2)
stuck_waiting_for_data()
"""


def hung_job(monkeypatch: pytest.MonkeyPatch, run_dir: Path, command: list[str], stacks_wait: float) -> int:
    """A command job of 2 ranks under the mock launcher, its watchdog quick (a hang after 3 s): its exit code."""
    monkeypatch.setattr(watchdog, "STARTUP_SECONDS", 0.0)
    monkeypatch.setattr(watchdog, "POLL_SECONDS", 0.5)
    monkeypatch.setattr(watchdog, "STACKS_WAIT_SECONDS", stacks_wait)
    body = JobBody(run_dir, nodes=1, tasks_per_node=2, command=True, hang_minutes=0.05)  # 3 s
    return run_job(body, command, {key: value for key, value in os.environ.items() if not key.startswith("SLURM_")})


def test_the_body_records_stacks_and_ends_a_step_on_which_no_rank_moves(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "rank.py"
    script.write_text(RANK)
    run_dir = tmp_path / "run"
    code = hung_job(monkeypatch, run_dir, [sys.executable, str(script)], 3.0)

    assert code == 143  # the step ended by the watchdog's SIGTERM (no Slurm: not retried here)
    err = capsys.readouterr().err
    assert "hpc-train: hung: no progress on any rank for 3 s: recording every rank's stacks" in err
    assert "failed: hung: no progress on any rank" in err
    for rank in (0, 1):
        dump = stacks.stacks_file(run_dir, 1, rank).read_text()
        assert dump.startswith(f"rank {rank}, attempt 1")
        assert "in stuck_waiting_for_data" in dump
        assert "stuck_waiting_for_data" in stacks.top_frames(dump)[0]


def test_a_command_that_keeps_beating_is_left_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watchdog, "STARTUP_SECONDS", 0.0)
    monkeypatch.setattr(watchdog, "POLL_SECONDS", 0.3)
    script = tmp_path / "rank.py"
    script.write_text("import os, time\nfor i in range(8):\n    time.sleep(0.5)\n    print(i, flush=True)\n"
                      "    open(os.path.join(os.environ['HPC_TRAIN_RUN_DIR'], '.heartbeat'), 'a').write('.')\n")
    body = JobBody(tmp_path / "run", nodes=1, tasks_per_node=1, command=True, hang_minutes=0.03)  # 1.8 s
    env = {key: value for key, value in os.environ.items() if not key.startswith("SLURM_")}
    assert run_job(body, [sys.executable, str(script)], env) == 0
    assert not (tmp_path / "run" / stacks.STACKS).exists()
    assert not (tmp_path / "run" / attempts.NOTES / attempts.HANG_NOTE).exists()


def test_hang_minutes_reaches_the_body_through_the_script_line(tmp_path: Path) -> None:
    import shlex

    from hpc_train.injob.jobline import parse
    from hpc_train.spec.jobline import script_line

    line = script_line("hpc-train", "runs/x", JobBody(Path("."), hang_minutes=1.5), "python t.py")
    words = shlex.split(line.replace("\\\n", " "))[3:]
    body, command = parse(words, {}, 0.0)
    assert (body.hang_minutes, command) == (1.5, ["python", "t.py"])
    assert parse(["--run-dir", "r", "--", "x"], {}, 0.0)[0].hang_minutes is None


def test_submit_and_render_take_hang_minutes_as_the_setting() -> None:
    import argparse

    from hpc_train.cli.joboptions import add_job_arguments, job_request
    from hpc_train.login.script import job_body

    parser = argparse.ArgumentParser()
    add_job_arguments(parser)
    spec, config, _ = job_request(parser.parse_args(["--nodes", "1", "--hang-minutes", "2"]))
    assert config.hang_minutes == 2 and job_body(spec, config, None).hang_minutes == 2


def test_a_step_that_ends_while_the_stacks_are_written_is_not_ended_or_called_hung(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    monkeypatch.setattr(watchdog, "STARTUP_SECONDS", 0.0)
    monkeypatch.setattr(watchdog, "POLL_SECONDS", 0.05)
    monkeypatch.setattr(watchdog, "STACKS_WAIT_SECONDS", 5.0)
    ended = threading.Event()
    dog = watchdog.Watchdog(watchdog.Watch(tmp_path, 0.001, False, 1), ended.set, say=lambda line: None).start()
    deadline = time.monotonic() + 5
    while stacks.requested_attempt(tmp_path) is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert stacks.requested_attempt(tmp_path) == 1 and dog.fired
    dog.stop()  # the step ended by itself
    assert not ended.wait(0.5)
    assert attempts.read_notes(tmp_path) == []


def test_ending_a_hung_step_under_slurm_signals_srun_and_nothing_once_it_is_gone() -> None:
    import signal
    import subprocess

    from hpc_train.injob.body import end_step

    # (Its TERM as srun's would be: an earlier test's epilogue may have left this process ignoring it.)
    srun = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                            preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL))
    end_step([srun], here=False)
    assert srun.wait(timeout=10) == -signal.SIGTERM
    end_step([srun], here=False)  # reaped: its pid is not signalled again
    end_step([], here=False)  # srun never started: nothing to end


def test_a_job_script_gives_hang_minutes_to_the_trainer_and_the_body_reads_it() -> None:
    from hpc_train.injob.body import parse

    line = ["--name", "m", "--trainer", "--", "hpc-train", "train", "--set", "epochs=2", "--set", "hang_minutes=3"]
    assert parse(line, {}, 0.0)[0].hang_minutes == 3
    assert parse(["--name", "m", "--trainer", "--", "hpc-train", "train", "--set=hang_minutes=0"], {}, 0.0)[0] \
        .hang_minutes == 0
    assert parse(["--name", "m", "--hang-minutes", "5", "--trainer", "--", "t", "--set", "hang_minutes=3"], {},
                 0.0)[0].hang_minutes == 5  # the body's own option wins
    assert parse(["--name", "m", "--", "cmd", "--set", "hang_minutes=3"], {}, 0.0)[0].hang_minutes is None


def test_the_start_up_allowance_is_the_trainers_startup_timeout(tmp_path: Path) -> None:
    from hpc_train.injob.watchdog import trainers_startup

    config = tmp_path / "config.yaml"
    config.write_text("epochs: 2\nstartup_timeout: 900\n")
    assert trainers_startup(["hpc-train", "train", "--config", str(config)], None) == 900
    assert trainers_startup(["hpc-train", "train", f"--config={config}"], None) == 900
    assert trainers_startup(["hpc-train", "train", "--config", str(config)], "60") == 60  # --set wins, as in the trainer
    for said in (None, "0", "-5", "soon"):  # none, or one the trainer refuses: its default
        assert trainers_startup(["hpc-train", "train"], said) == watchdog.STARTUP_SECONDS
    assert trainers_startup(["hpc-train", "train", "--config", str(tmp_path / "gone.yaml")], None) == 300
    assert threshold_seconds(1, beats(), startup=900) == 60 + 900
    assert is_hung(1, beats(), 959, startup=900) is False and is_hung(1, beats(), 960, startup=900)
    assert threshold_seconds(1, beats(5), startup=900) == 60  # after the first beat: no allowance


def test_the_body_gives_the_watchdog_the_trainers_startup_timeout_and_a_command_the_default(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hpc_train.injob import body as body_module

    watched: list[watchdog.Watch] = []

    class Seen(watchdog.Watchdog):
        def start(self) -> "Seen":
            watched.append(self.watch)
            return self

    monkeypatch.setattr(watchdog, "Watchdog", Seen)
    monkeypatch.setattr(body_module, "run_step", lambda *args: 0)
    trainer = ["hpc-train", "train", "--set", "startup_timeout=1200", "--output-dir", str(tmp_path)]
    body_module.watched_step(JobBody(tmp_path), trainer, {})
    body_module.watched_step(JobBody(tmp_path, command=True), ["python", "t.py", "--set", "startup_timeout=9"], {})
    body_module.watched_step(JobBody(tmp_path), ["hpc-train", "train"], {})
    assert [watch.startup for watch in watched] == [1200, None, 300]
    assert threshold_seconds(None, beats(), watched[0].startup) == watchdog.FLOOR_SECONDS + 1200


def test_a_job_scripts_trainer_config_file_gives_hang_minutes_unless_set_says_otherwise(tmp_path: Path) -> None:
    from hpc_train.injob.body import parse

    config = tmp_path / "mnist.yaml"
    config.write_text("epochs: 2\nhang_minutes: 4\n")
    line = ["--name", "m", "--trainer", "--", "hpc-train", "train", "--config", str(config)]
    assert parse(line, {}, 0.0)[0].hang_minutes == 4
    assert parse([*line, "--set", "hang_minutes=0"], {}, 0.0)[0].hang_minutes == 0
    config.write_text("epochs: 2\nhang_minutes:\n")  # empty: the run's own pace
    assert parse(line, {}, 0.0)[0].hang_minutes is None
