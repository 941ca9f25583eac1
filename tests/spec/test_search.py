"""An adaptive search's space: `--sweep KEY=LOW:HIGH[:log]`, choices, `--search`, `--trials` and YAML `search:`,
each bad one refused in one line before anything is written (pure; then through render)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpc_train.config import ConfigError, TrainConfig
from hpc_train.spec.search import Choice, Range, check_space, from_options, from_yaml
from hpc_train.spec.sweep import SweepError
from tests.cli.running import run_main


def test_ranges_log_ranges_and_choices_are_read_and_integers_stay_integers() -> None:
    search = from_options(["learning_rate=1e-4:1e-1:log", "batch_size=16:128", "checkpoint_share=0:0.5",
                           "optimizer=adam,sgd"], "tpe", 6)
    assert search is not None and (search.sampler, search.trials) == ("tpe", 6)
    space = dict(search.space)
    assert space["learning_rate"] == Range(1e-4, 1e-1, log=True, integer=False)
    assert space["batch_size"] == Range(16, 128, integer=True) and isinstance(space["batch_size"].low, int)
    assert space["optimizer"] == Choice(("adam", "sgd"))
    assert search.as_json()["space"]["batch_size"] == {"low": 16, "high": 128, "log": False, "int": True}


def test_a_grid_stays_a_grid_and_a_range_defaults_to_tpe() -> None:
    assert from_options(["seed=1,2"], None, None) is None
    assert from_options(["seed=1,2"], "grid", None) is None
    assert from_options(["learning_rate=0.001:0.1"], None, 4).sampler == "tpe"
    assert from_options(["seed=1,2,3"], "random", 2).space == (("seed", Choice((1, 2, 3))),)


@pytest.mark.parametrize("options, sampler, trials, said", [
    (["learning_rate=0.1:0.01"], "tpe", 3, "--sweep learning_rate=0.1:0.01: LOW is above HIGH"),
    (["learning_rate=0:0.1:log"], "tpe", 3, "a log range needs 0 < LOW"),
    (["lerning_rate=0.1:0.2"], "tpe", 3, "unknown key 'lerning_rate'"),
    (["learning_rate=0.001:0.1"], "tpe", 0, "--trials 0: give a whole number of trials, 1 or more"),
    (["learning_rate=0.001:0.1"], "grid", None, "--search grid with a range (learning_rate)"),
    (["learning_rate=0.001:0.1"], "bayes", 3, "--search bayes: unknown sampler; choose one of grid, random, tpe"),
    (["learning_rate=0.001:0.1"], "tpe", None, "add --trials N"),
    (["learning_rate=0.001:0.1:ln"], "tpe", 3, "unknown scale 'ln'"),
    (["seed=1,2"], None, 3, "--trials applies to --search tpe|random|cmaes"),
    (["seed=1:4", "seed=5:6"], "tpe", 3, "--sweep seed: given twice"),
])
def test_every_bad_space_is_one_line(options: list[str], sampler: str | None, trials: int | None, said: str) -> None:
    with pytest.raises(ConfigError) as raised:  # (a SweepError, or the config's own for an unknown key)
        from_options(options, sampler, trials)
    assert said in str(raised.value) and "\n" not in str(raised.value), raised.value


def test_the_yaml_search_section_reads_ranges_and_lists() -> None:
    search = from_yaml({"sampler": "random", "trials": 5, "seed": 3,
                        "space": {"learning_rate": "1e-4:1e-2:log", "batch_size": [32, 64]}})
    assert (search.sampler, search.trials, search.seed) == ("random", 5, 3)
    assert dict(search.space) == {"learning_rate": Range(1e-4, 1e-2, log=True), "batch_size": Choice((32, 64))}
    for body, said in [({"trials": 3, "space": {"learning_rate": "1:0.1"}}, "LOW is above HIGH"),
                       ({"sampler": "tpe", "space": {"seed": "1:9"}}, "add sweep search trials: N"),
                       ({"trials": 3, "space": {}}, "expected sampler: tpe, trials: N and space"),
                       ({"trials": 3, "spaces": {"seed": "1:2"}, "space": {"seed": "1:2"}}, "unknown key 'spaces'")]:
        with pytest.raises(SweepError, match=said.replace("(", r"\(")):
            from_yaml(body)


@pytest.mark.parametrize("args, said", [
    (["--sweep", "learning_rate=0.1:0.01", "--search", "tpe", "--trials", "3"], "LOW is above HIGH"),
    (["--sweep", "epochs=0:3", "--trials", "3"], "--sweep epochs: 0: epochs: must be 1 or more"),
    (["--sweep", "learning_rate=0.001:0.1", "--search", "grid"], "a grid takes values"),
    (["--search", "tpe"], "--search applies to a sweep"),
    (["--sweep", "seed=1,2", "--study-storage", "sqlite:///s.db"], "--study-storage applies to a sweep with a study"),
    (["--sweep", "seed=1,2", "--study-name", "lr"], "--study-name applies to a sweep with a study"),
    (["--sweep", "seed=1,2", "--seed", "3"], "--seed seeds a search's sampler: add a range"),
    (["--sweep", "learning_rate=1e-4:1e-2", "--trials", "2", "--seed", "-1"], "--seed -1: give a whole number from 0"),
    (["--sweep", "learning_rate=1e-4:1e-2", "--trials", "2", "--study-name", "lr"],
     "--study-name lr: a named study is shared through a database: add --study-storage"),
    (["--sweep", "learning_rate=1e-4:1e-2", "--trials", "2", "--study-name", " ", "--study-storage", "sqlite:///s.db"],
     "--study-name ' ': give the study's name"),
    (["--sweep", "learning_rate=1e-4:1e-2", "--trials", "2", "--study-name", "a\nb", "--study-storage",
      "sqlite:///s.db"], "a study's name is one line"),
    (["--sweep", "optimizer=adam,sgd:x", "--search", "random", "--trials", "2"], "--sweep optimizer: sgd:x"),
    (["--sweep", "learning_rate=0.001:0.1", "--trials", "2", "--", "python", "t.py", "--bs={batch_size}"],
     "uses {batch_size}, which no --sweep"),
])
def test_render_refuses_a_bad_search_in_one_line_and_writes_nothing(args: list[str], said: str, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "sweep.sbatch"
    code, _, err = run_main(["render", "--nodes", "2", "-o", str(output), *args], capsys)
    assert code == 2 and said in err and len(err.strip().splitlines()) == 1, err
    assert not output.exists()


def test_a_search_renders_one_array_whose_elements_ask_the_study(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "search.sbatch"
    code, _, err = run_main(["render", "--nodes", "2", "-o", str(output), "--sweep", "learning_rate=1e-4:1e-2:log",
                             "--sweep", "batch_size=32,64", "--trials", "4", "--max-parallel", "2",
                             "--prune", "median", "--study-storage", "sqlite:////shared/s.db"], capsys)
    assert code == 0, err
    assert "tpe search of 4 trials" in err and "learning_rate: 0.0001..0.01 (log)" in err
    script = output.read_text()
    assert "#SBATCH --array=0-3%2\n" in script and 'hpc-train trial --run-dir "$run_dir"' in script
    assert '"sampler": "tpe"' in script and '"prune": "median"' in script and 'source "$run_dir/trial.sh"' in script
    assert '"storage": "sqlite:////shared/s.db"' in script
    assert "case " not in script  # no values known at submit time


def test_rendering_a_search_never_imports_optuna(tmp_path: Path) -> None:
    import subprocess
    import sys

    code = ("import sys; from hpc_train.cli import main; main(['render', '--nodes', '1', '--sweep', "
            "'learning_rate=1e-4:1e-1:log', '--trials', '2', '--prune', 'hyperband', '-o', 'x.sbatch']); "
            "assert not [m for m in sys.modules if m.split('.')[0] in ('optuna', 'tensorflow')], 'imported'")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0 and (tmp_path / "x.sbatch").is_file(), done.stderr


def test_a_yaml_search_renders_and_cmaes_without_its_package_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    config = tmp_path / "search.yaml"
    config.write_text("sweep:\n  search:\n    sampler: random\n    trials: 5\n    space:\n"
                      "      learning_rate: 1e-4:1e-2:log\n      batch_size: [32, 64]\n")
    code, _, err = run_main(["render", "--nodes", "1", "--config", str(config), "-o", str(tmp_path / "s.sbatch")],
                            capsys)
    assert code == 0 and "random search of 5 trials" in err, err
    assert "#SBATCH --array=0-4\n" in (tmp_path / "s.sbatch").read_text()
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *rest: None)
    code, _, err = run_main(["render", "--nodes", "1", "--sweep", "learning_rate=1e-4:1e-2", "--search", "cmaes",
                             "--trials", "3", "-o", str(tmp_path / "c.sbatch")], capsys)
    assert code == 2 and "--search cmaes needs the cmaes package" in err and not (tmp_path / "c.sbatch").exists()


def test_a_hostile_command_reaches_the_trial_step_as_one_inert_word(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    import shlex
    import subprocess

    output = tmp_path / "s.sbatch"
    code, _, err = run_main(["render", "--nodes", "1", "-o", str(output), "--sweep", "learning_rate=1e-4:1e-2:log",
                             "--trials", "2", "--", "python", "t.py", "$(touch PWNED)", "--lr={learning_rate}"], capsys)
    assert code == 0, err
    [line] = [line for line in output.read_text().splitlines() if line.startswith("hpc-train trial ")]
    # The line as the batch shell runs it, hpc-train replaced by a function that prints its arguments.
    shown = subprocess.run(["bash", "-c", f'hpc-train() {{ printf "%s\\n" "$@"; }}; run_dir=RUN; {line}'],
                           cwd=tmp_path, capture_output=True, text=True)
    words = shown.stdout.splitlines()
    assert words[:4] == ["trial", "--run-dir", "RUN", "--command"] and not (tmp_path / "PWNED").exists()
    assert shlex.split(words[4])[-2:] == ["$(touch PWNED)", "--lr={learning_rate}"], words


def test_a_requeued_element_replaces_its_search_json_whole(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import subprocess

    output = tmp_path / "s.sbatch"
    code, _, err = run_main(["render", "--nodes", "1", "-o", str(output), "--sweep", "learning_rate=1e-4:1e-2:log",
                             "--trials", "2"], capsys)
    assert code == 0, err
    lines = output.read_text().splitlines()
    start = next(at for at, line in enumerate(lines) if "HPC_TRAIN_SEARCH" in line)
    end = next(at for at, line in enumerate(lines) if line.startswith("hpc-train trial "))
    run_dir = tmp_path / "sw-3_1 (a b)"
    run_dir.mkdir()
    (run_dir / "search.json").write_text('{"sampler": "the first start\'s"}')
    with open(run_dir / "search.json") as reader:  # a reader of the first start's file, as the script runs again
        done = subprocess.run(["bash", "-c", "\n".join(lines[start:end])], env={"run_dir": str(run_dir)},
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        # Renamed into place: the reader's file is whole (the old one), never truncated under it.
        assert reader.read() == '{"sampler": "the first start\'s"}'
    assert '"sampler": "tpe"' in (run_dir / "search.json").read_text() and sorted(path.name for path in
                                                                               run_dir.iterdir()) == ["search.json"]


def test_a_relative_sqlite_storage_is_made_absolute_from_where_it_was_submitted(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from hpc_train.runs.study import absolute_url

    monkeypatch.chdir(tmp_path)
    code, _, err = run_main(["render", "--nodes", "1", "-o", "s.sbatch", "--sweep", "learning_rate=1e-4:1e-2",
                             "--trials", "2", "--study-storage", "sqlite:///studies/s.db?timeout=30"], capsys)
    assert code == 0, err
    # The trial step (in the folder submitted from) and the ranks (in the code snapshot) open the same file.
    assert f'"storage": "sqlite:///{tmp_path}/studies/s.db?timeout=30"' in (tmp_path / "s.sbatch").read_text()
    assert not (tmp_path / "studies").exists()  # render opens nothing
    assert [absolute_url(url, tmp_path) for url in ("sqlite:////abs/s.db", "postgresql://host/db", "sqlite://")] == \
        ["sqlite:////abs/s.db", "postgresql://host/db", "sqlite://"]


@pytest.mark.parametrize("url, said", [
    ("sqlite:///no/such/folder/s.db", "(OperationalError: "),
    ("nosuchdialect://host/db", "(NoSuchModuleError: "),
    ("sqlite:///:memory:", "an in-memory database is each process's own"),
])
def test_submit_opens_the_study_storage_and_refuses_a_bad_one_in_one_line_before_anything_is_queued(
        url: str, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = run_main(["submit", "--nodes", "1", "--sweep", "learning_rate=1e-4:1e-2", "--trials", "2",
                             "--study-storage", url], capsys)
    assert code == 2 and "--study-storage " in err and said in err and "cannot open it" in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "runs").exists()


def test_submit_creates_a_writable_study_storage_before_anything_else(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path / "no-slurm"))  # the submit stops later: no sbatch here
    run_main(["submit", "--nodes", "1", "--sweep", "learning_rate=1e-4:1e-2", "--trials", "2",
              "--study-storage", "sqlite:///s.db"], capsys)
    assert (tmp_path / "s.db").stat().st_size > 0  # opened, its tables created


def test_a_yaml_search_takes_its_storage_relative_to_the_yaml_and_submit_opens_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "conf").mkdir()
    config = tmp_path / "conf" / "search.yaml"
    config.write_text("sweep:\n  search:\n    sampler: random\n    trials: 2\n    storage: sqlite:///studies/s.db\n"
                      "    space:\n      learning_rate: 1e-4:1e-2:log\n")
    monkeypatch.chdir(tmp_path)
    code, _, err = run_main(["render", "--nodes", "1", "--config", str(config), "-o", "s.sbatch"], capsys)
    assert code == 0, err
    assert f'"storage": "sqlite:///{tmp_path}/conf/studies/s.db"' in (tmp_path / "s.sbatch").read_text()
    code, _, err = run_main(["submit", "--nodes", "1", "--config", str(config)], capsys)
    assert code == 2 and err.startswith("hpc-train submit: error: sweep search storage: sqlite:///") and \
        "cannot open it (OperationalError: " in err and len(err.strip().splitlines()) == 1, err
    config.write_text(config.read_text().replace("storage: sqlite:///studies/s.db", "storage: [1]"))
    code, _, err = run_main(["render", "--nodes", "1", "--config", str(config), "-o", "t.sbatch"], capsys)
    assert code == 2 and "sweep search storage: [1]: give an RDB URL" in err, err


def test_a_searchs_seed_is_drawn_at_render_unless_given_and_shown_and_recorded(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json
    import re

    def rendered(*more: str) -> tuple[str, dict]:
        output = tmp_path / "s.sbatch"
        code, _, err = run_main(["render", "--nodes", "1", "-o", str(output), "--sweep", "learning_rate=1e-4:1e-2",
                                 "--search", "random", "--trials", "2", *more], capsys)
        assert code == 0, err
        [line] = [line for line in output.read_text().splitlines() if line.startswith('{"sampler"')]
        return err, json.loads(line)

    drawn = [rendered() for _ in range(2)]
    seeds = [spec["seed"] for _, spec in drawn]
    assert seeds[0] != seeds[1] and all(isinstance(seed, int) and 0 <= seed < 2**31 for seed in seeds), seeds
    for err, spec in drawn:  # shown as it is recorded in search.json
        assert re.search(rf"random search of 2 trials \(seed {spec['seed']}\)", err), err
    err, spec = rendered("--seed", "7", "--set", "seed=3")  # the training's seed is another
    assert spec["seed"] == 7 and "(seed 7)" in err and spec["study"] is None


def test_seed_and_study_name_are_read_and_checked_pure() -> None:
    from hpc_train.spec.search import checked_seed, checked_study_name, drawn_seed

    search = from_yaml({"trials": 2, "seed": 4, "study_name": "lr search", "space": {"learning_rate": "0.1:0.2"}})
    assert (search.seed, search.study, drawn_seed(search).seed) == (4, "lr search", 4)
    unseeded = from_yaml({"trials": 2, "space": {"learning_rate": "0.1:0.2"}})
    assert unseeded.seed is None and isinstance(drawn_seed(unseeded).seed, int)
    assert checked_seed(None, "--seed") is None and checked_seed(2**32 - 1, "--seed") == 2**32 - 1
    for bad in (-1, 2**32, True, "3", 1.5):
        with pytest.raises(SweepError, match="give a whole number from 0 to 4294967295"):
            checked_seed(bad, "--seed")
    assert checked_study_name("a'; $(x) \"b", "--study-name") == "a'; $(x) \"b"
    for bad, said in (("", "give the study's name"), ("a\tb", "one line"), ("x" * 513, "at most 512"),
                      (3, "give the study's name")):
        with pytest.raises(SweepError, match=said):
            checked_study_name(bad, "sweep search study_name:")


def test_a_hostile_study_name_reaches_search_json_whole_through_the_batch_shell(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json
    import subprocess

    hostile = "a'; touch PWNED; echo \"$(touch PWNED2)\" `id` HPC_TRAIN_SEARCH\\"
    output = tmp_path / "s.sbatch"
    code, _, err = run_main(["render", "--nodes", "1", "-o", str(output), "--sweep", "learning_rate=1e-4:1e-2:log",
                             "--trials", "2", "--study-name", hostile, "--study-storage", "sqlite:////shared/s.db"],
                            capsys)
    assert code == 0 and f"study: {hostile} (shared" in err, err
    lines = output.read_text().splitlines()
    start = next(at for at, line in enumerate(lines) if "HPC_TRAIN_SEARCH" in line)
    end = next(at for at, line in enumerate(lines) if line.startswith("hpc-train trial "))
    run_dir = tmp_path / "sw-3_1"
    run_dir.mkdir()
    done = subprocess.run(["bash", "-c", "\n".join(lines[start:end])], cwd=tmp_path, env={"run_dir": str(run_dir)},
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads((run_dir / "search.json").read_text())["study"] == hostile
    assert not (tmp_path / "PWNED").exists() and not (tmp_path / "PWNED2").exists()


def test_submit_refuses_to_continue_a_named_study_that_optimizes_the_other_way(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import optuna

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path / "no-slurm"))  # the submit stops later: no sbatch here
    optuna.create_study(study_name="lr", storage=f"sqlite:///{tmp_path}/s.db", direction="minimize")
    capsys.readouterr()  # (Optuna's own line of that creation, where nothing had quieted its log yet: the test's)
    code, _, err = run_main(["submit", "--nodes", "1", "--sweep", "learning_rate=1e-4:1e-2", "--trials", "2",
                             "--study-name", "lr", "--study-storage", "sqlite:///s.db"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"study lr in sqlite:///{tmp_path}/s.db is to minimize its objective, this sweep's val_accuracy to " \
           "maximize: give another --study-name" in err, err
    assert not (tmp_path / "runs").exists()
    code, _, err = run_main(["submit", "--nodes", "1", "--sweep", "learning_rate=1e-4:1e-2", "--trials", "2",
                             "--study-name", "lr", "--study-storage", "sqlite:///s.db", "--set", "objective=val_loss"],
                            capsys)
    assert "study lr" not in err, err  # the same way: continued (the submit stops later, for want of sbatch)


def test_a_commands_own_key_is_searched_as_its_values_say() -> None:
    search = from_options(["dropout=0.1:0.5", "nap=5:75", "mode=fast,slow", "batch_size=16:64"], "tpe", 4,
                          own_keys=True)
    assert dict(search.space) == {"dropout": Range(0.1, 0.5), "nap": Range(5, 75, integer=True),
                                  "mode": Choice(("fast", "slow")), "batch_size": Range(16, 64, integer=True)}
    check_space(search, TrainConfig())  # (its own keys are no settings: nothing to check them against)
    assert from_yaml({"trials": 2, "space": {"nap": "5:75"}}, own_keys=True).space == (("nap", Range(5, 75, integer=True)),)
    with pytest.raises(ConfigError, match="unknown key 'nap'"):
        from_options(["nap=5:75"], "tpe", 4)
