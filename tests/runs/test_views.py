"""What status, list, report and the demo show, computed from a record, a run folder and Slurm's states alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpc_train.runs import views
from hpc_train.runs.folders import JobRecord, element_records
from hpc_train.runs.views import RunFiles, SlurmView
from hpc_train.slurm.follow import job_state, job_states
from tests.fake_slurm import FakeSlurm, Reply

RETRIED = {"action": "retried", "attempt": 1, "after": "node2 task 1 was killed", "excluded": ["node2"]}


def job(**fields: object) -> JobRecord:
    base = dict(job_id="17", name="mnist", folder="runs/mnist-17", nodes=2, tasks=4, strategy="multiworker",
                submitted=0.0)
    return JobRecord(**{**base, **fields})  # type: ignore[arg-type]


def sweep(elements: list[dict]) -> JobRecord:
    return job(job_id="42", name="sw", folder="runs/sw-42", sweep="42", elements=elements)


def test_a_running_jobs_lines_name_its_state_nodes_command_history_and_last_progress_line() -> None:
    slurm = SlurmView("RUNNING", "0:0", "00:02:05", 1, "sacct", nodes="node[1-2]")
    run = RunFiles(state={"attempts": [RETRIED]}, max_retries=2)
    log = ["0: hpc-train: epoch 1/3  loss 0.5", "0: some other line", "0: hpc-train: epoch 2/3  loss 0.3"]
    assert views.job_lines(job(), slurm, run, log, default_max_retries=3) == [
        "job 17 (mnist): running [sacct]",
        "  nodes:   node[1-2] (4 tasks, multiworker)",
        "  runs:    hpc-train train",
        "  again:   requeued 1 time",
        "  history: attempt 2 of 3: retried after node2 task 1 was killed; node2 excluded",
        "  elapsed: 00:02:05",
        "  last:    hpc-train: epoch 2/3  loss 0.3",
        "  folder:  runs/mnist-17"]


def test_an_ended_job_shows_its_exit_code_a_pending_one_why_it_waits() -> None:
    ended = SlurmView("FAILED", "3:0", "00:00:09", 0, "sacct", ended=True)
    assert views.job_lines(job(), ended, RunFiles(), None, 3)[0] == "job 17 (mnist): failed, exit 3:0 [sacct]"
    pending = SlurmView("PENDING", "0:0", "00:00:00", 3, "scontrol/squeue: no Slurm accounting here",
                        waiting="the nodes asked for are busy")
    lines = views.job_lines(job(), pending, RunFiles(), None, 3)
    assert lines[0] == "job 17 (mnist): pending [scontrol/squeue: no Slurm accounting here]"
    assert "  nodes:   none yet (4 tasks, multiworker)" in lines and "  again:   requeued 3 times" in lines
    assert "  waiting: the nodes asked for are busy" in lines and "  last:    no progress yet" in lines


def test_a_users_command_shows_its_own_last_line_not_submitits() -> None:
    command = job(command=["python", "my train.py"])
    assert views.last_progress(command, ["epoch 1", "submitit INFO done", ""]) == "epoch 1"
    assert views.last_progress(command, ["submitit INFO starting"]) == "no progress yet"
    # Slurm may write the bootstrap's stderr line after the command's stdout: the command's line is still the last.
    assert views.last_progress(command, ["fine", "hpc-train bootstrap: rank 0 is worker 0 at n1:17056"]) == "fine"
    assert views.last_progress(command, ["hpc-train bootstrap: note: GPUs left as Slurm set them"]) == \
        "no progress yet"
    assert views.last_progress(job(), ["epoch 1"]) == "no progress yet"  # the trainer's lines only
    assert views.job_lines(command, SlurmView("RUNNING", "", "1", 0, "sacct"), RunFiles(), None, 3)[2] == \
        "  runs:    python 'my train.py'"


def test_the_attempts_allowed_come_from_state_json_else_the_settings_else_the_default() -> None:
    history = {"attempts": [RETRIED, {"action": "failed", "cause": "x", "attempt": 2}]}
    assert views.history_lines(RunFiles(state=history, max_retries=1), 3)[1] == "attempt 2 of 2 failed: x"
    assert views.history_lines(RunFiles(state=history), 3)[1] == "attempt 2 of 4 failed: x"
    assert views.history_lines(RunFiles(state=history, max_retries="many"), 0)[1] == "attempt 2 of 1 failed: x"
    assert views.history_lines(RunFiles(), 3) == []


def test_reading_a_run_folder_takes_max_retries_from_config_yaml_only_where_state_json_has_none(
        tmp_path: Path) -> None:
    assert views.read_run(tmp_path) == RunFiles()
    (tmp_path / "config.yaml").write_text("epochs: 3\nmax_retries: 5\n")
    assert views.read_run(tmp_path).max_retries is None  # no history: nothing to count
    (tmp_path / "state.json").write_text(json.dumps({"state": "running", "attempts": [RETRIED]}))
    (tmp_path / "metrics.json").write_text(json.dumps({"epochs": [{"epoch": 1, "val_loss": 0.4}, "junk"]}))
    run = views.read_run(tmp_path)
    assert run.max_retries == 5 and run.retries == 1 and run.epochs == [{"epoch": 1, "val_loss": 0.4}]
    (tmp_path / "state.json").write_text(json.dumps({"attempts": [RETRIED], "max_retries": 1}))
    assert views.read_run(tmp_path).max_retries == 1
    (tmp_path / "state.json").write_text(json.dumps({"attempts": [RETRIED]}))
    (tmp_path / "config.yaml").write_text(": not yaml : [")
    assert views.read_run(tmp_path).max_retries is None


def test_the_chiefs_log_is_rank_0s_and_none_before_it_exists(tmp_path: Path) -> None:
    record = job(folder=str(tmp_path))
    assert views.chief_log(record) is None
    (tmp_path / "17_0_log.out").write_text("0: hpc-train: epoch 1/2\n")  # submitted before logs/rank-N.out
    assert views.chief_log(record) == ["0: hpc-train: epoch 1/2"]
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "rank-0.out").write_text("hpc-train: epoch 2/2\n")  # every job's layout now
    assert views.chief_log(record) == ["hpc-train: epoch 2/2"]


@pytest.mark.parametrize(("figures", "shown"), [
    ({"val_loss": 0.25, "val_accuracy": 0.9}, "val_accuracy 0.9000"),
    ({"loss": 0.1, "val_loss": 0.25}, "val_loss 0.2500"),
    ({"loss": 0.1, "val_auc": 0.8}, "val_auc 0.8000"),
    ({"loss": 0.1}, "-"),
    ({"val_accuracy": [0.1, 0.2]}, "-")])
def test_an_elements_last_validation_figure_is_the_objective_else_its_first_validation_figure(
        figures: dict, shown: str) -> None:
    assert views.last_validation(figures) == shown


def test_a_sweep_shows_its_counts_a_row_per_element_and_where_its_folders_are() -> None:
    record = sweep([{"learning_rate": 0.01, "seed": 1}, {"learning_rate": 0.001, "seed": 1},
                    {"learning_rate": 0.01, "seed": 2}])
    runs = [RunFiles(metrics={"config": {"epochs": 3}, "epochs": [{"epoch": 1, "val_accuracy": 0.91}]}),
            RunFiles(state={"state": "pruned", "epoch": 1, "attempts": [RETRIED]},
                     metrics={"epochs": [{"epoch": 1, "val_loss": 0.5}]}),
            RunFiles()]
    lines = views.sweep_lines(record, runs, {0: "RUNNING", 1: "COMPLETED"})
    assert lines[0] == "sweep 42 (sw): 3 elements: 1 running, 1 pruned, 1 unknown"
    assert lines[1] == "  INDEX  learning_rate  seed  STATE     EPOCH  LAST VALIDATION      RETRIES"
    assert lines[2] == "  0      0.01           1     running   1/3    val_accuracy 0.9100  0"
    assert lines[3].split() == ["1", "0.001", "1", "pruned@1", "1", "val_loss", "0.5000", "1"]
    assert lines[4].split() == ["2", "0.01", "2", "unknown", "-", "-", "0"]
    assert lines[5] == "  folders: runs/sw-42_INDEX/ (hpc-train logs 42_INDEX)"


def test_list_shows_each_job_once_its_state_and_its_retries() -> None:
    element = element_records(sweep([{"seed": 1}]))[0]
    local = job(job_id="local-20250101-000000", name="a-very-long-name-cut-at-24-characters")
    records = views.listed([job(), element, sweep([{"seed": 1}]), local], limit=20)
    assert [record.job_id for record in records] == ["17", "42", "local-20250101-000000"]
    assert views.listed([job(), local], limit=1) == [job()]
    states = {"17": "RUNNING", "42": views.sweep_counts({0: "PENDING", 1: "RUNNING", 2: "PENDING"})}
    runs = {"17": RunFiles(state={"attempts": [RETRIED, RETRIED]}), "42": RunFiles(),
            "local-20250101-000000": RunFiles(state={"attempts": [RETRIED]})}
    lines = views.list_lines(records, states, runs)
    assert lines[0].split() == ["JOBID", "NAME", "STATE", "SUBMITTED", "FOLDER"]
    assert lines[1].split()[:4] == ["17", "mnist", "running", "(2"] and " (2 retries) " in lines[1]
    assert lines[2].split()[:5] == ["42", "sw", "sweep:", "2", "pending,"] and "sweep: 2 pending, 1 running" in lines[2]
    assert lines[3].split()[:4] == ["local-20250101-000000", "a-very-long-name-cut-at-", "local", "(1"]
    for column in ("NAME", "STATE", "SUBMITTED", "FOLDER"):  # every row's cells start where the header's do
        start = lines[0].index(column)
        assert all(line[start - 2:start] == "  " and line[start] != " " for line in lines[1:]), lines


def test_report_compares_a_sweeps_elements_by_their_shown_state_or_one_jobs_run() -> None:
    record = sweep([{"learning_rate": 0.1}, {"learning_rate": 0.01}])
    runs = [RunFiles(metrics={"epochs": [{"epoch": 1, "val_accuracy": 0.8}]}),
            RunFiles(state={"state": "pruned", "epoch": 2}, metrics={"epochs": [{"epoch": 2, "val_accuracy": 0.7}]})]
    elements = views.report_elements(record, runs, {0: "COMPLETED"})
    assert [(element.index, element.values, element.state, element.last("val_accuracy")) for element in elements] \
        == [(0, {"learning_rate": 0.1}, "completed", 0.8), (1, {"learning_rate": 0.01}, "pruned@2", 0.7)]
    assert views.report_keys(record, runs) == ["learning_rate"] and views.report_keys(job(), runs[:1]) == []
    # An adaptive search's elements: no values at submit time, each its trial's once drawn, "-" before.
    drawn = sweep([{}, {}])
    searched = [RunFiles(drawn={"learning_rate": 0.02, "batch_size": 64}), RunFiles()]
    assert views.report_keys(drawn, searched) == ["learning_rate", "batch_size"]
    lines = views.sweep_lines(drawn, searched, {0: "RUNNING", 1: "PENDING"})
    assert lines[1].split()[:3] == ["INDEX", "learning_rate", "batch_size"]
    assert lines[2].split()[:4] == ["0", "0.02", "64", "running"] and lines[3].split()[:4] == ["1", "-", "-", "pending"]
    one = views.report_elements(job(), [RunFiles(metrics={"epochs": [{"val_loss": 0.2}]})], {0: "RUNNING"})
    assert [(element.index, element.state, element.last("val_loss")) for element in one] == [(0, "RUNNING", 0.2)]


def test_the_demo_ends_with_the_jobs_state_and_what_it_trained() -> None:
    metrics = {"world_size": 2, "strategy": "multiworker", "totals": {
        "epochs": 3, "seconds": 41.26, "images_per_second": 4321.4, "final_val_accuracy": 0.97654}}
    lines = views.demo_lines("9", "COMPLETED", "0:0", Path("slurm-9.out"), 62.4, Path("runs/mnist-9"), metrics)
    assert lines == ["\nhpc-train demo: job 9 completed (exit 0:0) after 62 s", "  log:     slurm-9.out",
                     "  result:  validation accuracy 0.9765 after 3 epochs on 2 tasks (multiworker), 41.3 s of "
                     "training at 4321 images/s",
                     "  model:   runs/mnist-9/model.keras", "  metrics: runs/mnist-9/metrics.json"]
    assert views.demo_lines("9", "FAILED", "", Path("x.out"), 1.0, None, {}) == [
        "\nhpc-train demo: job 9 failed (exit ?) after 1 s", "  log:     x.out"]


def forgetful_slurm(folder: Path) -> FakeSlurm:
    """Slurm once it has forgotten a job (MinJobAge), with no accounting: scontrol and squeue know nothing of it."""
    return FakeSlurm(folder, {"scontrol": Reply(stderr="slurm_load_jobs error: Invalid job id specified\n", code=1),
                              "squeue": "", "sacct": Reply(stderr="sacct: error: accounting storage is disabled\n",
                                                           code=1)})


def test_a_job_slurm_forgot_is_shown_as_its_run_folder_says(tmp_path: Path) -> None:
    # The demo's state.json as it was: the trainer finished; the prologue recorded the attempt's start and nodes.
    folder = tmp_path / "runs" / "mnist-1"
    folder.mkdir(parents=True)
    (folder / "state.json").write_text(json.dumps({"state": "finished", "time": 1065.0, "attempt": {
        "number": 1, "nodes": "pnode[1-2]", "started": 1000.0}}))
    run = views.read_run(folder)
    slurm = forgetful_slurm(tmp_path / "fake").client()
    assert job_state("1", slurm) == ("UNKNOWN", "") and job_states(["1"], slurm) == {"1": "UNKNOWN"}
    assert views.known_state("UNKNOWN", run) == "COMPLETED (from the run folder)"
    assert views.known_state("RUNNING", run) == "RUNNING"  # where Slurm knows the job, its word wins
    record = job(job_id="1", folder=str(folder))
    assert views.job_lines(record, views.folder_view(run), run, None, 3) == [
        "job 1 (mnist): completed, exit 0 [from the run folder: Slurm no longer knows the job]",
        "  nodes:   pnode[1-2] (4 tasks, multiworker)",
        "  runs:    hpc-train train",
        "  elapsed: 00:01:05 (1 attempt)",
        "  last:    no progress yet",
        f"  folder:  {folder}"]
    assert views.list_lines([record], {"1": "UNKNOWN"}, {"1": run})[1].split()[2:6] == [
        "completed", "(from", "the", "run"]


def test_a_retried_job_slurm_forgot_shows_its_attempts_time_last_nodes_and_end() -> None:
    state = {"attempts": [{**RETRIED, "action": "failed", "cause": "node3 task 0: Killed"}],
             "attempt": {"number": 2, "nodes": "node[3-4]", "started": 5000.0},
             "ended": [{"attempt": 1, "nodes": "node[1-2]", "started": 1000.0, "ended": 1030.0, "exit": 0,
                        "goes_on": True},
                       {"attempt": 2, "nodes": "node[3-4]", "started": 5000.0, "ended": 91440.0, "exit": 137,
                        "goes_on": False}]}
    run = RunFiles(state=state, max_retries=1)
    view = views.folder_view(run)
    assert (view.state, view.exit_code, view.nodes, view.elapsed, view.ended) == (
        "FAILED", "137", "node[3-4]", "1-00:01:10 (2 attempts)", True)
    lines = views.list_lines([job()], {"17": "UNKNOWN"}, {"17": RunFiles(state={**state, "attempts": [RETRIED]})})
    assert " failed (from the run folder, 1 retry) " in lines[1]


def test_a_forgotten_job_whose_folder_records_no_end_stays_unknown_and_says_why() -> None:
    run = RunFiles(state={"state": "running", "attempt": {"number": 1, "nodes": "n1", "started": 1000.0}})
    view = views.folder_view(run)
    assert views.job_lines(job(), view, run, None, 3)[:2] == [
        "job 17 (mnist): unknown [Slurm no longer knows the job, and its run folder records no end]",
        "  nodes:   n1 (4 tasks, multiworker)"]
    assert view.elapsed == "? (1 attempt)" and views.known_state("UNKNOWN", run) == "UNKNOWN"
    here = views.folder_view(RunFiles(state={"state": "finished", "time": 10.0}), local=True)  # submit --local
    assert (here.state, here.source) == ("COMPLETED", "from the run folder: run here, not under Slurm")


def test_a_sweeps_element_slurm_forgot_shows_its_folders_state() -> None:
    record = sweep([{"seed": 1}, {"seed": 2}])
    runs = [RunFiles(state={"state": "finished", "time": 10.0}), RunFiles()]
    lines = views.sweep_lines(record, runs, {0: "UNKNOWN", 1: "UNKNOWN"})
    assert lines[0] == "sweep 42 (sw): 2 elements: 1 completed (from the run folder), 1 unknown"
    assert lines[2].split()[:6] == ["0", "1", "completed", "(from", "the", "run"]


def test_a_requeued_jobs_elapsed_is_every_attempts_and_its_nodes_line_its_newest_attempts_tasks() -> None:
    """Issue 46: a --nodes 2-4 job requeued from 4 nodes to 2: Slurm's elapsed time is its newest attempt's alone,
    and job.json's tasks its request's."""
    state = {"attempt": {"number": 2, "nodes": "pa[3-4]", "tasks": "2", "started": 2000.0},
             "ended": [{"attempt": 1, "nodes": "pa[1-4]", "tasks": "4", "started": 1000.0, "ended": 1031.0,
                        "exit": None, "goes_on": True}]}
    slurm = SlurmView("RUNNING", "0:0", "00:29", 1, "scontrol", nodes="pa[3-4]")
    lines = views.job_lines(job(), slurm, RunFiles(state=state), None, 3)
    assert "  nodes:   pa[3-4] (2 tasks, multiworker)" in lines and "  elapsed: 00:01:00 (2 attempts)" in lines, lines
    first = views.job_lines(job(), slurm, RunFiles(state={"attempt": {"number": 1, "started": 1.0}}), None, 3)
    assert "  nodes:   pa[3-4] (4 tasks, multiworker)" in first and "  elapsed: 00:29" in first  # one attempt
    assert [views.slurm_seconds(text) for text in ("00:29", "01:02:03", "1-00:00:01", "INVALID", "")] == [
        29, 3723, 86401, None, None]
