"""--data-workers and its company on render and submit: rendered into the job line, or refused in one line."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from hpc_train.injob.jobline import parse
from tests.cli.running import run_main
from tests.fake_slurm import FakeSlurm
from tests.login.test_preflight import NODES, PARTITIONS


def test_render_carries_the_service_to_the_job_body(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "job.sbatch"
    code, _, err = run_main(["render", "--nodes", "2", "--data-workers", "2", "--data-cpus", "1", "-o",
                             str(output)], capsys)
    assert code == 0, err
    script = output.read_text()
    line = script[script.index("job --run-dir"):].replace("\\\n", " ")
    words = shlex.split(line.split(" -- ", 1)[0])
    assert words[words.index("--data-workers") + 1] == "2"
    body, _ = parse([*words[1:], "--", "true"], {}, 0.0)
    assert body.data_service is not None and body.data_service.workers == 2


@pytest.mark.parametrize("args, mincpus", [
    (["--nodes", "1", "--data-workers", "2"], 3),  # 1 rank + 2 workers of 1 CPU on the one node
    (["--nodes", "2", "--data-workers", "3", "--data-cpus", "2"], 5),  # 1 rank + ceil(3/2) x 2
    (["--nodes", "2", "--data-workers", "auto", "--data-cpus", "2"], 3),  # the worker it starts with
    (["--nodes", "2", "--data-workers", "2", "--sweep", "seed=1,2"], 2),  # each element of the array
])
def test_the_scripts_request_holds_the_workers_cpus_beside_the_ranks(args: list[str], mincpus: int, tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "job.sbatch"
    code, _, err = run_main(["render", *args, "-o", str(output)], capsys)
    assert code == 0, err
    asked = [line for line in output.read_text().splitlines() if line.startswith("#SBATCH --mincpus")]
    assert asked == [f"#SBATCH --mincpus={mincpus}"]


def test_auto_reaches_the_job_body_and_its_window_holds_the_most_workers(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """--data-workers auto (and the YAML's workers: auto): the job line says auto, the body starts with one worker,
    and the window holds the ports of the most it may add (8: the comment tells the site kit 9)."""
    config = tmp_path / "job.yaml"
    for args in (["--data-workers", "auto"], ["--data-workers", "AUTO"], ["--config", str(config)]):
        config.write_text("job:\n  data_service: {workers: auto, cpus: 2}\n")
        output = tmp_path / "job.sbatch"
        code, _, err = run_main(["render", "--nodes", "2", *args, "-o", str(output)], capsys)
        assert code == 0, err
        script = output.read_text()
        assert "hpc-train-service-ports=9" in script
        line = script[script.index("job --run-dir"):].replace("\\\n", " ")
        words = shlex.split(line.split(" -- ", 1)[0])
        assert words[words.index("--data-workers") + 1] == "auto"
        body, _ = parse([*words[1:], "--", "true"], {}, 0.0)
        assert body.data_service is not None and body.data_service.auto and body.data_service.workers == 1
        assert body.data_service.processes == 9


def test_a_sixteen_rank_job_gets_a_window_that_holds_its_service(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """16 ranks fill a window of 16: the window grows, and the script's comment tells the site kit by how much."""
    output = tmp_path / "job.sbatch"
    code, _, err = run_main(["render", "--nodes", "16", "--data-workers", "3", "--sbatch", "comment=mine",
                             "-o", str(output)], capsys)
    assert code == 0, err
    assert "#SBATCH --comment='hpc-train-service-ports=4 mine'" in output.read_text()


def test_the_yaml_job_section_asks_for_the_service(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "job.yaml"
    config.write_text("epochs: 1\njob:\n  data_service: {workers: 3, cpus: 2}\n")
    output = tmp_path / "job.sbatch"
    code, _, err = run_main(["render", "--nodes", "2", "--config", str(config), "-o", str(output)], capsys)
    assert code == 0, err
    assert "--data-workers 3 --data-cpus 2" in output.read_text()
    config.write_text("job:\n  data_service: 3\n")
    code, _, err = run_main(["render", "--nodes", "2", "--config", str(config), "-o", str(output)], capsys)
    assert code == 2 and "job: data_service 3" in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("args, said", [
    (["--data-workers", "0"], "--data-workers 0: must be a whole number of 1 or more"),
    (["--data-workers", "many"], "--data-workers 'many': must be a whole number of 1 or more, or auto"),
    (["--data-cpus", "2"], "--data-cpus applies to a job's data service: add --data-workers N"),
    (["--data-workers", "1", "--pack", "--sweep", "seed=1,2"], "--data-workers 1 with --pack"),
])
def test_what_cannot_be_served_is_one_line(args: list[str], said: str, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "job.sbatch"
    code, _, err = run_main(["render", "--nodes", "2", "-o", str(output), *args], capsys)
    assert code == 2 and said in err and len(err.strip().splitlines()) == 1, err
    assert not output.exists()


def test_submit_refuses_the_service_with_local(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_main(["submit", "--nodes", "1", "--local", "--data-workers", "1", "--output-dir",
                             str(tmp_path)], capsys)
    assert code == 2 and "--data-workers 1 with --local" in err and len(err.strip().splitlines()) == 1, err
    code, _, err = run_main(["submit", "--nodes", "1", "--local", "--data-workers", "auto", "--output-dir",
                             str(tmp_path)], capsys)
    assert code == 2 and "--data-workers auto with --local" in err and len(err.strip().splitlines()) == 1, err


def test_a_hostile_partition_never_reaches_a_shell(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A partition's name is checked before anything could reach a script: nothing is written, nothing runs."""
    output = tmp_path / "job.sbatch"
    code, _, err = run_main(["render", "--nodes", "1", "-o", str(output), "--data-workers", "1",
                             "--data-partition", "cpu'; touch pwned; echo '"], capsys)
    assert code == 2 and "--data-partition" in err and len(err.strip().splitlines()) == 1, err
    assert not output.exists() and not list(tmp_path.rglob("pwned"))


def test_a_data_partition_that_does_not_exist_is_named_and_one_that_does_is_a_component_of_its_own(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    fake = FakeSlurm(tmp_path / "fake", {"scontrol show partition": PARTITIONS, "scontrol show node": NODES})
    for name, value in fake.install(tmp_path / "bin").items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("SLURM_CONF", raising=False)
    output = tmp_path / "job.sbatch"
    args = ["render", "--nodes", "1", "-o", str(output), "--data-workers", "1", "--data-partition"]
    code, _, err = run_main([*args, "cpus"], capsys)
    assert code == 2 and "--data-partition cpus: no such partition here; choose one of debug, gpu" in err, err
    assert len(err.strip().splitlines()) == 1 and not output.exists()
    code, _, err = run_main([*args, "debug", "--data-cpus", "2"], capsys)
    assert code == 0, err
    script = output.read_text()
    # The ranks' block, then the service's own: its dispatcher and its worker as 2 tasks of 2 CPUs on debug.
    own = script[script.index("#SBATCH hetjob"):].splitlines()[:4]
    assert own == ["#SBATCH hetjob", "#SBATCH --cpus-per-task=2", "#SBATCH --ntasks=2", "#SBATCH --partition=debug"]
    # The comment tells the site kit the service's ports and that component 1 holds it (its tasks are no ranks).
    assert "#SBATCH --comment=hpc-train-service-ports=2,hpc-train-service-component=1\n" in script
    line = script[script.index("job --run-dir"):].replace("\\\n", " ")
    body, _ = parse([*shlex.split(line.split(" -- ", 1)[0])[1:], "--", "true"], {}, 0.0)
    assert body.data_service is not None and body.data_service.partition == "debug"


def test_a_data_partition_in_the_yaml_and_with_a_sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """The YAML's data_service: takes the partition as the flag does; a sweep of such jobs is refused (Slurm has no
    arrays of heterogeneous jobs), in one line."""
    fake = FakeSlurm(tmp_path / "fake", {"scontrol show partition": PARTITIONS, "scontrol show node": NODES})
    for name, value in fake.install(tmp_path / "bin").items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("SLURM_CONF", raising=False)
    config = tmp_path / "job.yaml"
    config.write_text("job:\n  data_service: {workers: 2, partition: debug}\n")
    output = tmp_path / "job.sbatch"
    code, _, err = run_main(["render", "--config", str(config), "--nodes", "2", "-o", str(output)], capsys)
    assert code == 0, err
    assert "#SBATCH hetjob\n#SBATCH --ntasks=3\n#SBATCH --partition=debug\n" in output.read_text()
    code, _, err = run_main(["render", "--config", str(config), "--nodes", "2", "--sweep", "lr=0.1,0.2", "-o",
                             str(tmp_path / "sweep.sbatch")], capsys)
    assert code == 2 and "--data-partition with a sweep" in err and len(err.strip().splitlines()) == 1, err
