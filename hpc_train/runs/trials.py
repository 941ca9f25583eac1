"""What `hpc-train report` shows of a sweep's Optuna study: its trials ranked, the best, Optuna's plots, best.yaml.

Read back through Optuna (runs/study.py's storage): each trial's number, element, state, value and values, the
best by the study's direction (a study that sweeps share, `--study-name`: every sweep's trials, another sweep's
element named by its folder, NAME-ARRAYID_I), and three PNGs beside sweep.csv: the optimization history, the parameters'
importance (PED-ANOVA, which needs no scikit-learn, unlike Optuna's default fANOVA) and the parallel
coordinates. `--export best.yaml` writes the best trial's element's settings, to run again.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from hpc_train.runs.study import SEARCH_FILE, STUDY_FILE, read_json, storage

PLOTS = ("study-history.png", "study-importance.png", "study-parallel.png")
# Left out of best.yaml: the element's own run folder, and `prune` (a sweep's, which `submit --config best.yaml`,
# one job, would refuse: --prune applies to a sweep). The rest are plain settings of one job.
NOT_EXPORTED = ("output_dir", "prune")


def has_study(sweep_folder: Path, elements: Sequence[Path]) -> bool:
    """Whether the sweep keeps a study: its journal, or an element's search.json naming an RDB."""
    return (sweep_folder / STUDY_FILE).is_file() or any(_url(elements))


def _url(elements: Sequence[Path]) -> list[str]:
    return [url for folder in elements if (url := read_json(folder / SEARCH_FILE).get("storage"))]


def load(sweep_folder: Path, elements: Sequence[Path]) -> Any:
    """The sweep's study, as its elements wrote it: the one --study-name named, else the sweep's own."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    urls = _url(elements)
    return optuna.load_study(study_name=searched(elements).get("study") or sweep_folder.name,
                             storage=storage(sweep_folder, urls[0] if urls else None))


def searched(elements: Sequence[Path]) -> dict[str, Any]:
    """An element's search.json (the script writes the same into each): the sweep's seed, study and storage."""
    return next((spec for folder in elements if (spec := read_json(folder / SEARCH_FILE))), {})


def element_label(trial: Any, study_name: str) -> str:
    """A trial's element as the report names it: its index in the sweep's own study; in a study that sweeps
    share, its run folder's name (NAME-ARRAYID_I), which says whose it is."""
    element, sweep = trial.user_attrs.get("element"), trial.user_attrs.get("sweep")
    if element is None:
        return "-"
    return f"{sweep}_{element}" if sweep not in (None, study_name) else str(element)


def ranked(study: Any) -> list[Any]:
    """The finished trials with a value, best first, then the rest (running, failed) by number."""
    with_value = [trial for trial in study.trials if trial.value is not None]
    with_value.sort(key=lambda trial: trial.value, reverse=study.direction.name == "MAXIMIZE")
    return with_value + [trial for trial in study.trials if trial.value is None]


def lines(study: Any, seed: int | None = None) -> list[str]:
    """The study's trials ranked (number, element, state, value, values), the best named (pure on the study);
    `seed`: the sweep's sampler seed (search.json's), shown."""
    trials = ranked(study)
    keys = list(dict.fromkeys(key for trial in trials for key in trial.params))
    rows = [["TRIAL", "ELEMENT", "STATE", "VALUE", *keys]] + [
        [str(trial.number), element_label(trial, study.study_name), trial.state.name,
         "-" if trial.value is None else f"{trial.value:.4f}", *(_text(trial.params.get(key, "-")) for key in keys)]
        for trial in trials]
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    seeded = "" if seed is None else f"; this sweep's seed {seed}"
    shown = [f"study {study.study_name} ({study.direction.name.lower()}): {len(trials)} trials{seeded}"]
    shown += ["  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
    best = _best(study)
    if best is not None:
        values = ", ".join(f"{key}={_text(value)}" for key, value in best.params.items())
        shown.append(f"best trial: {best.number} (element {element_label(best, study.study_name)}): "
                     f"{best.value:.4f} with {values}")
    return shown


def csv_text(study: Any) -> str:
    """The trials ranked as CSV: trial, element, state, value, then each key's value."""
    import csv
    import io

    ranked_trials = ranked(study)
    keys = list(dict.fromkeys(key for trial in ranked_trials for key in trial.params))
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["trial", "element", "state", "value", *keys])
    for trial in ranked_trials:
        writer.writerow([trial.number, "" if trial.user_attrs.get("element") is None else
                         element_label(trial, study.study_name), trial.state.name,
                         "" if trial.value is None else trial.value, *(trial.params.get(key, "") for key in keys)])
    return out.getvalue()


def _best(study: Any) -> Any:
    complete = [trial for trial in study.trials if trial.state.name == "COMPLETE"]
    if not complete:
        return None
    return (max if study.direction.name == "MAXIMIZE" else min)(complete, key=lambda trial: trial.value)


def _text(value: Any) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def plots(study: Any, folder: Path) -> list[Path]:
    """Optuna's optimization history, parameter importance and parallel coordinates as PNGs; those it could draw
    (importance needs two finished trials that differ)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import optuna.visualization.matplotlib as drawings
    from optuna.exceptions import ExperimentalWarning
    from optuna.importance import PedAnovaImportanceEvaluator

    makers = (lambda: drawings.plot_optimization_history(study),
              lambda: drawings.plot_param_importances(study, evaluator=PedAnovaImportanceEvaluator()),
              lambda: drawings.plot_parallel_coordinate(study))
    drawn = []
    for name, make in zip(PLOTS, makers):
        try:
            with warnings.catch_warnings():  # Optuna's matplotlib plots are marked experimental: not news to a user
                warnings.simplefilter("ignore", ExperimentalWarning)
                axes = make()
        except (ValueError, RuntimeError, ZeroDivisionError):  # too few trials for this plot
            continue
        figure = (axes.flat[0] if hasattr(axes, "flat") else axes).get_figure()
        figure.savefig(folder / name, dpi=100, bbox_inches="tight")
        plt.close(figure)
        drawn.append(folder / name)
    return drawn


def export_best(study: Any, element_folder: Any, path: Path) -> dict[str, Any]:
    """The best trial's element's settings (its config.yaml, drawn values in, its run folder out) into `path`.
    `element_folder(index)`: this sweep's element's folder; another sweep's (a shared study) is its sibling."""
    best = _best(study)
    if best is None:
        raise ValueError("no trial of the study has finished yet: nothing to export")
    folder = element_folder(best.user_attrs.get("element"))
    label = element_label(best, study.study_name)
    if best.user_attrs.get("sweep") not in (None, study.study_name):
        folder = folder.parent / label
    if not (folder / "config.yaml").is_file():
        raise ValueError(f"the best trial's element {label} has no {folder / 'config.yaml'}: its sweep ran from "
                         "another runs folder; export from there")
    return export_settings(folder, path, f"the best trial ({best.number}, element {label}) of study "
                                         f"{study.study_name}: {best.value:.4f}")


def export_settings(folder: Path, path: Path, heading: str) -> dict[str, Any]:
    """An element's settings (its config.yaml: a grid's or a drawn element's values in, its run folder out) into
    `path`, under a `# heading` line: a grid or random sweep's best element, from its folder (no study needed)."""
    if not (folder / "config.yaml").is_file():
        raise ValueError(f"{folder / 'config.yaml'} is not there: its run folder holds no settings to export")
    settings = yaml.safe_load((folder / "config.yaml").read_text()) or {}
    for key in NOT_EXPORTED:
        settings.pop(key, None)
    path.write_text(f"# {heading}\n" + yaml.safe_dump(settings, sort_keys=False))
    return settings
