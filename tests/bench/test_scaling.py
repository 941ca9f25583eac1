"""The scaling benchmark's pure parts: its job scripts (run through a real shell), its plan and its arithmetic."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from hpc_train.bench import projection
from hpc_train.bench import scaling
from hpc_train.bench.scaling import analysis, driver, runs, section
from hpc_train.bench.scaling.analysis import checks, efficiencies
from hpc_train.bench.scaling.driver import job_script
from hpc_train.bench.scaling.runs import Result, Run, plan
from hpc_train.errors import HpcTrainError
from tests.fake_slurm import FakeSlurm, Reply

HOSTILE = ["x'; touch PWNED #", "$(touch PWNED)", "`touch PWNED`", 'a "quoted" dir', "semi;colon && touch PWNED"]


def executable(path: Path, body: str) -> None:
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def run_with_fake_tools(script_text: str, tmp_path: Path, procid: int) -> None:
    """Run a job script through bash with srun, taskset and hpc-train faked.

    srun runs its command once as task `procid`; taskset appends its core to `cores`; hpc-train
    writes its arguments as JSON to `argv.RANK` (RANK: BENCH_RANK, else SLURM_PROCID).
    """
    bin_dir = tmp_path / "bin"
    FakeSlurm(tmp_path / "fake", {"srun": Reply(shell=f'while [[ $1 == --* ]]; do shift; done\n'
                                                      f'SLURM_PROCID={procid} exec "$@"\n')}).install(bin_dir)
    executable(bin_dir / "taskset", 'echo "$2" >> "$CORE_FILE"\nshift 2\nexec "$@"\n')
    print_argv = 'python3 -c \'import json, sys; print(json.dumps(sys.argv[1:]))\' "$@"'
    executable(bin_dir / "hpc-train", print_argv + ' > "$ARGV_FILE.${BENCH_RANK:-$SLURM_PROCID}"\n')
    script = tmp_path / "job.sbatch"
    script.write_text(script_text)
    environment = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "ARGV_FILE": str(tmp_path / "argv"),
                   "CORE_FILE": str(tmp_path / "cores")}
    subprocess.run(["bash", str(script)], cwd=tmp_path, env=environment, check=True, timeout=30)


@pytest.mark.parametrize("hostile", HOSTILE)
def test_a_job_script_passes_hostile_paths_verbatim_and_runs_nothing_else(hostile: str, tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(driver, "HPC_TRAIN", str(tmp_path / "bin" / "hpc-train"))
    data_dir, output = tmp_path / hostile / "data", tmp_path / hostile / "out"
    run_with_fake_tools(job_script(Run("multiworker", 2, 256), data_dir, output, cores=2), tmp_path, procid=1)
    argv = json.loads((tmp_path / "argv.1").read_text())
    assert argv[:5] == ["train", "--data-dir", str(data_dir), "--output-dir", str(output)]
    assert "batch_size=256" in argv and "strategy=multiworker" in argv and "steps_per_epoch=64" in argv
    assert (tmp_path / "cores").read_text().strip() == "1"  # task 1 on core 1
    assert not list(tmp_path.rglob("PWNED"))


def test_independent_workers_train_alone_each_into_its_own_folder(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(driver, "HPC_TRAIN", str(tmp_path / "bin" / "hpc-train"))
    output = tmp_path / "it's out"
    run_with_fake_tools(job_script(Run(runs.INDEPENDENT, 2, 64), tmp_path / "data", output, cores=2), tmp_path,
                        procid=0)
    argvs = [json.loads((tmp_path / f"argv.{rank}").read_text()) for rank in (0, 1)]  # one file each
    assert [run[-1] for run in argvs] == [f"output_dir={output}/task0", f"output_dir={output}/task1"]
    assert all("strategy=none" in run for run in argvs)
    assert sorted((tmp_path / "cores").read_text().split()) == ["0", "1"]  # one core each


def test_a_job_asks_one_node_per_task() -> None:
    server_job = job_script(Run("parameter_server", 2, 64), Path("/data"), Path("/out"), cores=2)
    assert "#SBATCH --nodes=4" in server_job  # chief, one ps, two workers
    assert "strategy=parameter_server" in server_job
    assert "#SBATCH --nodes=1" in job_script(Run("multiworker", 1, 64), Path("/data"), Path("/out"), cores=2)


def test_the_learning_rate_grows_with_the_square_root_of_the_global_batch() -> None:
    assert Run("multiworker", 1, 64).learning_rate == pytest.approx(0.001)
    assert Run("multiworker", 2, 512).learning_rate == pytest.approx(0.004)


def test_every_worker_trains_the_same_images_per_epoch_at_any_batch() -> None:
    assert Run("multiworker", 2, 64).steps_per_epoch * 64 == Run("multiworker", 1, 1024).steps_per_epoch * 1024


def test_each_repetition_runs_every_job_once_in_alternating_order() -> None:
    first, second = plan((64, 256), 0), plan((64, 256), 1)
    assert second == first[::-1]
    assert len(set(first)) == len(first) == 8  # 2 batches x (1, 2, 2 independent workers) + parameter_server at both
    assert Run("parameter_server", 2, 256) in first


def test_efficiency_and_ceiling_pair_each_repetitions_runs() -> None:
    results = {Run("multiworker", 1, 64): [Result(1000.0, 0.9), Result(500.0, 0.9)],
               Run("multiworker", 2, 64): [Result(1800.0, 0.9), Result(1000.0, 0.9)],
               Run(runs.INDEPENDENT, 2, 64): [Result(1900.0, 0.9), Result(950.0, 0.9)]}
    assert efficiencies(results, 64) == pytest.approx([0.9, 1.0])
    assert analysis.ceilings(results, 64) == pytest.approx([0.95, 0.95])
    assert "reached 95% of twice one alone at 64 images" in analysis.machine_share(results, [64])


def test_efficiency_near_the_goal_is_shown_to_a_tenth_of_a_point() -> None:
    results = {Run("multiworker", 1, 1024): [Result(1000.0, 0.9)], Run("multiworker", 2, 1024): [Result(1796.0, 0.9)],
               Run(runs.INDEPENDENT, 2, 1024): [Result(1940.0, 0.9)]}
    (row,) = analysis.scaling_rows(results, [1024])
    assert row[5:9] == ("89.8%", "89.8-89.8%", "97.0%", "97.0-97.0%")  # not a rounded-up "90%"


def test_the_model_check_compares_step_seconds() -> None:
    results = {Run("multiworker", 1, 64): [Result(640.0, 0.9)], Run("multiworker", 2, 64): [Result(1000.0, 0.9)]}
    compute = projection.ComputeModel(fixed=0.0, per_image=0.001)
    link = projection.Link("test", bandwidth=1e9, latency=0.0)
    one, two = checks(results, (64,), compute, link)
    assert (one.workers, one.measured, one.predicted) == (1, pytest.approx(0.1), pytest.approx(0.064))
    assert two.measured == pytest.approx(0.128)  # 128 images a step at 1,000 images/s
    assert two.predicted == pytest.approx(0.064 + runs.GRADIENT_BYTES / 1e9)


def test_a_jobs_figure_is_the_median_of_its_epochs_after_the_warm_up() -> None:
    epochs = [{"images_per_second": rate, "val_accuracy": 0.9} for rate in (100.0, 500.0, 900.0, 1000.0, 1100.0)]
    epochs[-1]["val_accuracy"] = 0.95
    assert runs.WARMUP_EPOCHS == 2  # the slow first and second epochs below are left out
    assert driver.result_of({"epochs": epochs}) == Result(1000.0, 0.95)


def test_measurements_saved_are_read_back_whole(tmp_path: Path) -> None:
    measured = runs.Measured((64,), 1, {"workers": 2, "sizes": [1, 2], "seconds": [0.1, 0.2]},
                                {Run("multiworker", 1, 64): [Result(1000.0, 0.97)],
                                 Run("parameter_server", 2, 64): [Result(1500.0, 0.96)]})
    runs.save(measured, tmp_path / "results.json")
    assert runs.load(tmp_path / "results.json") == measured


def test_a_failed_job_is_one_error_naming_it_with_its_log_shown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    fake = FakeSlurm(tmp_path / "fake", {"sbatch": "42;local\n", "squeue": "",  # already gone from the queue
                                         "scontrol": "JobId=42 JobState=FAILED Reason=NonZeroExitCode\n"})
    monkeypatch.setenv("PATH", fake.install(tmp_path / "bin")["PATH"])
    (tmp_path / "slurm.out").write_text("hpc-train train: error: the data is gone\n")
    with pytest.raises(HpcTrainError, match="benchmark job 42 did not complete"):
        driver.run_job("#!/bin/bash\n", tmp_path)
    assert "the data is gone" in capsys.readouterr().err


@pytest.mark.parametrize("exit_status", [0, 3])
def test_a_job_script_leaves_its_end_marker_however_it_ends(exit_status: int, tmp_path: Path) -> None:
    output = tmp_path / "it's $(out)"
    output.mkdir()
    script = "\n".join([*driver.sbatch_header("t", 1, output), f"exit {exit_status}", ""])
    finished = subprocess.run(["bash", "-c", script], cwd=tmp_path, timeout=30)
    assert finished.returncode == exit_status
    assert (output / driver.ENDED_MARKER).exists()


def test_waiting_for_a_job_asks_squeue_seldom_while_it_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """squeue and slurmctld take CPU from the workers being measured: the marker, a stat, tells the end."""
    marker = tmp_path / driver.ENDED_MARKER
    fake = FakeSlurm(tmp_path / "fake", {
        "sbatch": Reply(shell=f'(sleep 2; touch "{marker}") >/dev/null 2>&1 &\necho "42;local"\n'),
        "squeue": Reply(shell=f'[[ -e "{marker}" ]] || echo 42\n'),
        "scontrol": "JobId=42 JobState=COMPLETED\n"})
    monkeypatch.setenv("PATH", fake.install(tmp_path / "bin")["PATH"])
    driver.run_job("#!/bin/bash\n", tmp_path)
    assert marker.exists()
    # Once as the job starts and once after its end: polling twice a second would have asked 4 times or more.
    assert len(fake.calls("squeue")) == 2


def test_the_report_names_the_repetitions_it_was_measured_with() -> None:
    assert section.reproducing_command(runs.DEFAULT_REPETITIONS) == "hpc-train bench scaling"
    assert section.reproducing_command(5) == "hpc-train bench scaling --repetitions 5"


def test_a_job_that_never_leaves_the_queue_is_cancelled_at_the_deadline(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Even after its script has ended (the marker is there), a job stuck in the queue does not hang the benchmark."""
    fake = FakeSlurm(tmp_path / "fake", {
        "sbatch": Reply(shell=f'touch "{tmp_path / driver.ENDED_MARKER}"\necho "42;local"\n'),
        "squeue": "42\n",  # stuck, say in COMPLETING
        "scancel": ""})
    monkeypatch.setenv("PATH", fake.install(tmp_path / "bin")["PATH"])
    monkeypatch.setattr(driver, "JOB_TIMEOUT", 1)
    with pytest.raises(HpcTrainError, match="benchmark job 42 ran past 1 s and was cancelled"):
        driver.run_job("#!/bin/bash\n", tmp_path)
    assert [call.args[0] for call in fake.calls("scancel")] == ["42"]


@pytest.mark.parametrize("text", ["1024,x", "0", "64,,256", "-64"])
def test_malformed_batches_are_refused_before_anything_runs(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scaling, "require_slurm", lambda name: pytest.fail("measured before checking --batches"))
    with pytest.raises(HpcTrainError, match=rf"--batches '{text}': expected per-worker batches, whole numbers"):
        scaling.main(["--batches", text])


def test_one_batch_is_reported_without_the_projection_it_cannot_fit(capsys: pytest.CaptureFixture[str]) -> None:
    assert scaling.parse_batches("1024, 1024") == (1024,)
    results = {run: [Result(1000.0 * run.workers, 0.97)] for run in plan((1024,), 0)}
    measured = runs.Measured((1024,), 1, {"workers": 2, "sizes": [1e5, 1e6], "seconds": [0.001, 0.004]}, results)
    scaling.report(measured, write=False)
    shown = capsys.readouterr().out
    assert "| 1024 |" in shown and "No projection: it fits a line through the step times at two batches" in shown
