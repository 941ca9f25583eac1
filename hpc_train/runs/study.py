"""A sweep's Optuna study: one shared file in the sweep's folder, no database server (issue 31).

The study lives in `runs/NAME-ARRAYID/study.journal` (Optuna's JournalStorage over a JournalFileBackend: every
process appends to the one file under a lock, so it works on a shared filesystem), or in an RDB URL when given.
It is named after the sweep's folder (NAME-ARRAYID), or as `--study-name` says (issue 36): a study in the database
that many sweeps share, created by the first element to ask and continued by every other, each trial marked with
its sweep's folder and element index.
Each element of the job array (`runs/NAME-ARRAYID_I/`) keeps its own part in two files:

- `search.json`: what the script says of the search (sampler, seed, space, pruner, objective, storage, study);
- `trial.json`: its trial's number, id and drawn values, written once when it first asks; a requeued or retried
  element reads it back and never asks again.

Its life: `ask` when the element starts (before its ranks), `report` at each epoch's end (the chief; True: the
pruner stops it, and the trial is PRUNED already), `conclude` after its step (COMPLETE with its objective, or
nothing while it is requeued), `fail` once its retries are spent. Optuna is imported inside the functions: the
CLI starts without it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hpc_train.runs.metrics import epochs
from hpc_train.runs.objective import objective_name
from hpc_train.runs.secret import PRIVATE_FOLDER
from hpc_train.runs.state import read_json_object as read_json, read_state, write_json_atomically, write_state

STUDY_FILE = "study.journal"
SEARCH_FILE = "search.json"
TRIAL_FILE = "trial.json"
PRUNERS = ("none", "halving", "median", "hyperband")
# numpy's generators (Optuna's samplers) take seeds below 2**32.
SEED_LIMIT = 2**32
# SQLite: how long a writer waits for another's lock (Python's default, 5 s, is what two sweeps' elements asking
# one study at once ran into: "database is locked"), and how often a new database is opened again when the first
# processes to open it race to create its tables.
SQLITE_WAIT_SECONDS = 120.0
OPEN_TRIES = 5
_ELEMENT = re.compile(r"^(?P<sweep>.+-\d+)_(?P<index>\d+)$")


def sweep_folder(run_dir: Path) -> Path:
    """runs/NAME-ARRAYID for the element runs/NAME-ARRAYID_I (the study's folder)."""
    match = _ELEMENT.match(run_dir.name)
    if match is None:
        raise ValueError(f"{run_dir} is not an element of a sweep (runs/NAME-ARRAYID_I)")
    return run_dir.parent / match.group("sweep")


def element_index(run_dir: Path) -> int:
    match = _ELEMENT.match(run_dir.name)
    return int(match.group("index")) if match else 0


def read_trial(run_dir: Path) -> dict[str, Any]:
    """The element's trial.json ({} before it asked): number, id and values."""
    return read_json(run_dir / TRIAL_FILE)


def storage(folder: Path, url: str | None = None) -> Any:
    """The study's storage: the journal file in the sweep's folder, or the RDB at `url` (behind the cache a Study
    puts in front of it: a trial that claim creates through another object is one the study's cache never heard
    of, and its first suggest fails with a KeyError)."""
    import optuna

    if url:
        return optuna.storages.get_storage(rdb(url))
    folder.mkdir(parents=True, exist_ok=True, mode=PRIVATE_FOLDER)
    return optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(folder / STUDY_FILE)))


def rdb(url: str) -> Any:
    """Optuna's RDBStorage at `url`; SQLite's writers wait SQLITE_WAIT_SECONDS for a lock (unless the URL says
    timeout=), and a process that lost the race to create a new database's tables opens it again."""
    import time

    import optuna
    import sqlalchemy.exc

    waits = {"connect_args": {"timeout": SQLITE_WAIT_SECONDS}} if url.startswith("sqlite") and "timeout=" not in url \
        else {}
    for attempt in range(1, OPEN_TRIES + 1):
        try:
            return optuna.storages.RDBStorage(url, engine_kwargs=waits)
        except (sqlalchemy.exc.OperationalError, sqlalchemy.exc.IntegrityError):
            if attempt == OPEN_TRIES:
                raise
            time.sleep(0.1 * attempt)


def study_name(run_dir: Path, spec: Mapping[str, Any]) -> str:
    """The element's study: --study-name's (search.json's `study`), else its sweep's folder's name."""
    return spec.get("study") or sweep_folder(run_dir).name


def element_seed(seed: int, index: int, sweeps_before: int = 0) -> int:
    """Element `index`'s sampler seed (pure): its own, so that elements asking at once draw apart; the search's
    seed differs between sweeps (drawn at submit), so their elements do too. `sweeps_before`: the other sweeps
    already in its (shared) study: a sweep given a seed one of them used draws new trials, not theirs again
    (a sampler's first trials are drawn from its seed alone); 0 in a study of its own, so that a seed repeats a
    sweep there."""
    return (seed + 1_000_003 * (index + 1) + 7_919 * sweeps_before) % SEED_LIMIT


def sweeps_before(study: Any, sweep: str) -> int:
    """How many other sweeps have trials in the study (each trial is marked with its sweep's folder name)."""
    return len({trial.user_attrs.get("sweep") for trial in study.get_trials(deepcopy=False)} - {sweep, None})


def existing_direction(url: str, name: str) -> str | None:
    """How the study `name` in the database at `url` optimizes ("minimize", "maximize"; "minimize, maximize" for
    one of several objectives); None when there is none yet."""
    store = rdb(url)
    try:
        study_id = store.get_study_id_from_name(name)
    except KeyError:
        return None
    return ", ".join(direction.name.lower() for direction in store.get_study_directions(study_id))


def absolute_url(url: str, cwd: Path) -> str:
    """--study-storage as every process of the job reads it: a relative SQLite file made absolute from `cwd` (the
    submit's). The array's trial step runs in the folder submitted from, the ranks in the code snapshot: a relative
    file would be two studies (pure)."""
    match = re.match(r"^(?P<dialect>sqlite(?:\+\w+)?):///(?P<path>[^?]*)(?P<query>\?.*)?$", url.strip())
    if match is None or match["path"].startswith("/") or match["path"] in ("", ":memory:"):
        return url
    return f"{match['dialect']}:///{cwd.absolute() / match['path']}{match['query'] or ''}"


def open_storage(url: str) -> None:
    """The database at `url` opened at submit, its tables created: a bad URL, a driver that is missing or a file
    that cannot be written fails here, before anything is queued (the study itself is named by the array's id,
    not known yet; its first element creates it)."""
    import optuna

    if url.startswith("sqlite") and (url.rstrip("/") == "sqlite:" or ":memory:" in url):
        raise ValueError("an in-memory database is each process's own; give a file, sqlite:////shared/path/s.db")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    rdb(url)


def distributions(space: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """search.json's space as Optuna's distributions: a range (int or float, log or not), or a choice."""
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    made: dict[str, Any] = {}
    for key, entry in space.items():
        if "choices" in entry:
            made[key] = CategoricalDistribution(list(entry["choices"]))
        elif entry.get("int"):
            made[key] = IntDistribution(int(entry["low"]), int(entry["high"]), log=bool(entry.get("log")))
        else:
            made[key] = FloatDistribution(float(entry["low"]), float(entry["high"]), log=bool(entry.get("log")))
    return made


def sampler(name: str, space: Mapping[str, Mapping[str, Any]], seed: int) -> Any:
    """The sampler by name; `seed`: each element's own (the same seed in every element would draw alike)."""
    import optuna

    if name == "grid":
        # A grid element's values are its own (fixed): any sampler returns a single choice as it is.
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "cmaes":
        return optuna.samplers.CmaEsSampler(seed=seed, warn_independent_sampling=False)
    return optuna.samplers.TPESampler(seed=seed)


def pruner(name: str, epochs: int) -> Any:
    """Optuna's pruner for `prune:`: halving (asynchronous successive halving at epochs 1, 2, 4, 8, ...: the worse
    half stops), median, hyperband; none."""
    import optuna

    if name == "halving":
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=2)
    if name == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=1, n_warmup_steps=0)
    if name == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=1, max_resource=max(1, epochs), reduction_factor=3)
    return optuna.pruners.NopPruner()


def load(run_dir: Path, spec: Mapping[str, Any] | None = None, index: int = -1, store: Any = None) -> Any:
    """The element's study (created by the first element to ask, or another sweep's continued), with its sampler
    (seeded for element `index`) and pruner. A study that optimizes the other way is refused (StudyMismatch):
    Optuna would continue it silently, ranking this sweep's trials backwards."""
    import optuna

    spec = spec if spec is not None else read_json(run_dir / SEARCH_FILE)
    wanted = "minimize" if spec.get("minimize") else "maximize"
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    loaded = optuna.create_study(
        storage=store or storage(sweep_folder(run_dir), spec.get("storage")), study_name=study_name(run_dir, spec),
        load_if_exists=True, direction=wanted, pruner=pruner(spec.get("prune", "none"), int(spec.get("epochs", 1))),
        sampler=sampler(spec.get("sampler", "tpe"), spec.get("space", {}),
                        element_seed(int(spec.get("seed") or 0), index)))
    found = ", ".join(direction.name.lower() for direction in loaded.directions)
    if found != wanted:
        raise StudyMismatch(f"study {loaded.study_name} is to {found} its objective, this sweep's is to {wanted}: "
                            "submit it with another --study-name")
    before = sweeps_before(loaded, sweep_folder(run_dir).name) if spec.get("study") else 0
    if before:  # a shared study other sweeps drew in: seeded apart from theirs (element_seed)
        loaded.sampler = sampler(spec.get("sampler", "tpe"), spec.get("space", {}),
                                 element_seed(int(spec.get("seed") or 0), index, before))
    return loaded


class StudyMismatch(ValueError):
    """A named study that this sweep cannot continue (one line, with the fix)."""


def ask(run_dir: Path, fixed: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """This element's trial: read back when it has one (a requeue, a retry), else claimed in the study (claim) and
    kept in trial.json. `fixed`: a grid element's own values (registered as they are, search.json's space
    holding each key's choices)."""
    known = read_trial(run_dir)
    if known:
        return known
    spec = read_json(run_dir / SEARCH_FILE)
    index = element_index(run_dir)
    store = storage(sweep_folder(run_dir), spec.get("storage"))
    # Each element its own seed: the same in all would draw the same first values.
    study = load(run_dir, spec, index, store=store)
    space = distributions(spec.get("space", {}))
    trial = claim(study, store, index, sweep_folder(run_dir).name)
    if fixed is None:
        values = {key: draw(trial, key, distribution) for key, distribution in space.items()}
    else:
        values = register(store, trial, fixed, space)
    # Optuna names a trial to other processes by its id: kept with its number (the number is what people see).
    kept = {"number": trial.number, "trial_id": trial._trial_id, "values": values, "study": study.study_name}
    write_json_atomically(run_dir / TRIAL_FILE, kept)
    return kept


def claim(study: Any, store: Any, index: int, sweep: str) -> Any:
    """The element's trial, RUNNING: created with its sweep's folder name and element index in the one write that
    creates it, so that no trial is ever without its owner; an element restarted after a crash before its
    trial.json was written adopts that trial (its sweep and index, still RUNNING: in a study that sweeps share,
    another sweep's element of the same index is not it) and its values drawn so far, instead of leaving it
    RUNNING forever and asking another. The study is then the only record of the claim: no lock, no second file
    to keep in step."""
    import optuna

    running = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
    own = [trial for trial in running if trial.user_attrs.get("element") == index
           and trial.user_attrs.get("sweep", sweep) == sweep]  # (a trial of before issue 36: the sweep's own study)
    if own:
        return optuna.trial.Trial(study, own[-1]._trial_id)
    template = optuna.trial.create_trial(state=optuna.trial.TrialState.RUNNING,
                                         user_attrs={"element": index, "sweep": sweep})
    created = store.create_new_trial(store.get_study_id_from_name(study.study_name), template_trial=template)
    return optuna.trial.Trial(study, created)


def register(store: Any, trial: Any, fixed: Mapping[str, Any], space: Mapping[str, Any]) -> dict[str, Any]:
    """Given values (a grid element's, in its config) set in `trial`, each under its key's whole choice (`space`:
    every element's values), so that all the study's trials agree on their distributions. The values."""
    for key, value in fixed.items():
        if key not in trial.params:  # (an adopted trial may hold some already)
            store.set_trial_param(trial._trial_id, key, space[key].to_internal_repr(value), space[key])
    return dict(fixed)


def ask_fixed(study: Any, store: Any, fixed: Mapping[str, Any], space: Mapping[str, Any]) -> Any:
    """A new trial of `study` with the given values (the benchmark's grid: one process, nothing to adopt)."""
    trial = study.ask()
    register(store, trial, fixed, space)
    return trial


def draw(trial: Any, key: str, distribution: Any) -> Any:
    """The trial's value for `key` (drawn by the study's sampler as Study.ask draws it; one drawn already stays)."""
    from optuna.distributions import CategoricalDistribution, IntDistribution

    if isinstance(distribution, CategoricalDistribution):
        return trial.suggest_categorical(key, distribution.choices)
    if isinstance(distribution, IntDistribution):
        return trial.suggest_int(key, distribution.low, distribution.high, step=distribution.step, log=distribution.log)
    return trial.suggest_float(key, distribution.low, distribution.high, step=distribution.step, log=distribution.log)


def report(run_dir: Path, epoch: int, value: float) -> bool:
    """The objective at the end of `epoch`, into the element's trial; True when the pruner stops it (the trial is
    then PRUNED). False for a run that is no sweep element with a trial."""
    kept = read_trial(run_dir)
    if not kept or not math.isfinite(value):
        return False
    import optuna

    study = load(run_dir)
    trial = optuna.trial.Trial(study, int(kept["trial_id"]))
    if study.get_trials(deepcopy=False)[kept["number"]].state.is_finished():
        return False
    trial.report(float(value), int(epoch))
    if not trial.should_prune():
        return False
    study.tell(kept["number"], state=optuna.trial.TrialState.PRUNED, skip_if_finished=True)
    return True


def conclude(run_dir: Path, value: float | None) -> str | None:
    """After the element's step: COMPLETE with its objective `value`; without one, COMPLETE with the last value
    it reported, else FAIL. The state it was told (None: no trial, or already finished)."""
    kept = read_trial(run_dir)
    if not kept:
        return None
    import optuna

    study = load(run_dir)
    frozen = study.get_trials(deepcopy=False)[kept["number"]]
    if frozen.state.is_finished():
        return None
    if value is None and frozen.intermediate_values:
        value = frozen.intermediate_values[max(frozen.intermediate_values)]
    if value is None or not math.isfinite(value):
        study.tell(kept["number"], state=optuna.trial.TrialState.FAIL, skip_if_finished=True)
        return "FAIL"
    study.tell(kept["number"], float(value), skip_if_finished=True)
    return "COMPLETE"


def fail(run_dir: Path) -> str | None:
    """The element's retries are spent, or its step failed for good: its trial is FAIL (the sampler learns from
    the trials that finished)."""
    kept = read_trial(run_dir)
    if not kept:
        return None
    import optuna

    load(run_dir).tell(kept["number"], state=optuna.trial.TrialState.FAIL, skip_if_finished=True)
    return "FAIL"


def settle(run_dir: Path, job_code: int) -> str | None:
    """After the element's step, when it does not go on (no retry, no requeue): FAIL for a job that failed, else
    COMPLETE with its last epoch's objective (metrics.json's; a command's last reported value). None: nothing
    told (pruned or stopped)."""
    if job_code != 0:
        return fail(run_dir)
    if read_state(run_dir).get("state") in ("requeued", "stopped", "pruned"):
        return None
    return conclude(run_dir, final_objective(run_dir))


def final_objective(run_dir: Path) -> float | None:
    """The objective at the run's last epoch (metrics.json), as search.json names it; None without epochs."""
    logged = epochs(run_dir)
    if not logged:
        return None
    last = logged[-1]
    value = last.get(objective_name(read_json(run_dir / SEARCH_FILE).get("objective"), last))
    return float(value) if isinstance(value, (int, float)) else None


def report_from_command(epoch: int, value: float, environ: Mapping[str, str]) -> bool:
    """`hpc_train.report(epoch, value)`: a user's command's objective into its element's trial, from rank 0 (the
    others, and a run outside a sweep, False). The element's folder is HPC_TRAIN_RUN_DIR (the job body's)."""
    folder = environ.get("HPC_TRAIN_RUN_DIR")
    if not folder or environ.get("SLURM_PROCID", "0") != "0":
        return False
    if not report(Path(folder), epoch, value):
        return False
    # The command exits 0 (Slurm: COMPLETED): state.json says it stopped here, as a pruned trainer's does, so that
    # status and report show pruned@EPOCH, and the job body tells the study nothing more (settle).
    write_state(Path(folder), "pruned", epoch=epoch,
                reason=f"objective {value:.4f} at epoch {epoch}: the sweep's pruner stops it")
    return True
