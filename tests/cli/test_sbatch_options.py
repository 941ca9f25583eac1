"""`--after`, `--dependency` and `--sbatch OPTION=VALUE` on render and submit: each reaches the script (a sweep's
too), a bad one is one line and exit 2, and --local refuses them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.running import run_main

ASKED = ["--after", "1234_5", "--sbatch", "reservation=maint", "--sbatch=--exclude=node[1-2]", "--sbatch",
         "mail-user=a b@c.d", "--sbatch", "contiguous"]
SHOWN = ["#SBATCH --dependency=afterany:1234_5\n", "#SBATCH --reservation=maint\n",
         "#SBATCH --exclude='node[1-2]'\n", "#SBATCH --mail-user='a b@c.d'\n", "#SBATCH --contiguous\n"]


@pytest.mark.parametrize("args, said", [
    (["--after", "12;touch x"], "--after '12;touch x': expected a job id (1234), an array's element (1234_5)"),
    (["--after", "12", "--dependency", "afterok:13"], "--after and --dependency: give one (--after 12 is "
                                                      "--dependency afterany:12, both --dependency afterany:12,"
                                                      "afterok:13)"),
    (["--dependency", "afterok"], "--dependency 'afterok': expected Slurm's TYPE:JOBID"),
    (["--sbatch", "time=10"], "--sbatch time=10: hpc-train sets it; use --time"),
    (["--sbatch", "nodes=3"], "--sbatch nodes=3: hpc-train sets it; use --nodes"),
    (["--sbatch", "exclud=node1"], "--sbatch exclud=node1: not an sbatch option; did you mean exclude?"),
    (["--sbatch", "reservation"], "--sbatch reservation: takes a value"),
])
def test_a_bad_slurm_option_is_one_line_exit_2_and_nothing_is_written(args: list[str], said: str, tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "job.sbatch"
    code, _, err = run_main(["render", "--nodes", "2", "-o", str(output), *args], capsys)
    assert code == 2 and said in err and len(err.strip().splitlines()) == 1, err
    assert not output.exists()


def test_render_and_dry_run_show_them_quoted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, rendered, err = run_main(["render", "--nodes", "2", *ASKED], capsys)
    assert code == 0, err
    code, submitted, err = run_main(["submit", "--nodes", "2", "--no-snapshot", "--output-dir", str(tmp_path),
                                     "--dry-run", *ASKED, "--", "true"], capsys)
    assert code == 0, err
    for line in SHOWN:
        assert rendered.count(line) == 1 and submitted.count(line) == 1, line


def test_a_sweep_waits_as_one_array(capsys: pytest.CaptureFixture[str]) -> None:
    code, script, err = run_main(["render", "--nodes", "1", "--sweep", "seed=1,2", *ASKED], capsys)
    assert code == 0, err
    assert "#SBATCH --array=0-1\n" in script and all(script.count(line) == 1 for line in SHOWN)


@pytest.mark.parametrize("args", [["--after", "12"], ["--dependency", "singleton"], ["--sbatch", "exclude=node1"]])
def test_local_refuses_them_in_one_line(args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_main(["submit", "--nodes", "1", "--local", "--no-snapshot", "--output-dir", str(tmp_path),
                             *args, "--", "true"], capsys)
    assert code == 2 and f"{args[0]} with --local: the job runs here at once, without Slurm" in err, err
    assert len(err.strip().splitlines()) == 1 and not any(tmp_path.iterdir())


def test_the_yamls_job_section_asks_the_same_and_a_flag_wins(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "job.yaml"
    config.write_text("epochs: 1\njob:\n  after: '1234_5'\n  sbatch:\n    reservation: maint\n    exclude: node[1-2]\n"
                      "    mail-user: a b@c.d\n    contiguous: true\n    oversubscribe: false\n")
    code, script, err = run_main(["render", "--nodes", "2", "--config", str(config)], capsys)
    assert code == 0, err
    assert all(script.count(line) == 1 for line in SHOWN) and "oversubscribe" not in script
    code, script, err = run_main(["render", "--nodes", "2", "--config", str(config), "--dependency", "afterok:9",
                                  "--sbatch", "reservation=other"], capsys)
    assert code == 0, err
    assert "#SBATCH --dependency=afterok:9\n" in script and "#SBATCH --reservation=other\n" in script
    assert "afterany" not in script and "maint" not in script and "#SBATCH --contiguous\n" in script


@pytest.mark.parametrize("section, said", [
    ("  sbatch:\n    time: 10\n", "job: sbatch: time=10: hpc-train sets it; use --time"),
    ("  sbatch:\n    reservation:\n", "job: sbatch: reservation: None: give a value (a flag: true)"),
    ("  sbatch: [exclude=node1]\n", "job: sbatch: a mapping of sbatch's options"),
    ("  after: abc\n", "job: after 'abc': a job id (1234)"),
    ("  dependency: afterok\n", "job: dependency 'afterok': Slurm's syntax, e.g. afterok:1234"),
    ("  afterok: 12\n", "job: 'afterok' is not a job option; known: ps_partition, ps_nodes, after, dependency, sbatch"),
])
def test_a_bad_slurm_option_in_the_yaml_is_one_line(section: str, said: str, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "job.yaml"
    config.write_text(f"job:\n{section}")
    code, _, err = run_main(["render", "--nodes", "1", "--config", str(config)], capsys)
    assert code == 2 and f"{config}: {said}" in err and len(err.strip().splitlines()) == 1, err
