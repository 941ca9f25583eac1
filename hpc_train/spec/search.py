"""An adaptive search: the space of `--sweep KEY=LOW:HIGH[:log]` and `KEY=V1,V2`, its sampler and trials (pure).

Issue 31: `--search tpe|random|grid|cmaes` and `--trials N` (YAML: `sweep: {search: {sampler, trials, seed,
space}}`). A range's values are not known at submit time: each element of the job array asks the sweep's
Optuna study for them when it starts (runs/study.py). Here the space is only read and checked, every bad one
refused in one line before anything is written. Integers stay integers: a range of an integer setting
(batch_size, epochs) draws whole numbers. Issue 36: the sampler's seed is drawn at submit unless `--seed` (or the
YAML's `seed:`) sets it, so that two sweeps, or one submitted again, draw other values; search.json records it.
"""

from __future__ import annotations

import re
import secrets
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from hpc_train.config import ConfigError, TrainConfig, setting_value, to_dict
from hpc_train.spec.sweep import SweepError, is_setting, key_value

SAMPLERS = ("grid", "random", "tpe", "cmaes")
# LOW:HIGH or LOW:HIGH:log, each end a number (1e-4, 0.5, 32).
_RANGE = re.compile(r"^\s*([-+0-9.eE]+)\s*:\s*([-+0-9.eE]+)\s*(?::\s*(\w+)\s*)?$")
# A sampler's seed: numpy's RandomState (Optuna's samplers) takes 0 <= seed < 2**32.
SEED_LIMIT = 2**32
# Optuna's RDB keeps a study's name in 512 characters.
STUDY_NAME_LIMIT = 512


@dataclass(frozen=True)
class Range:
    """Values from low to high, both included; `log`: drawn evenly on a log scale; `integer`: whole numbers."""

    low: float
    high: float
    log: bool = False
    integer: bool = False

    def as_json(self) -> dict[str, Any]:
        return {"low": self.low, "high": self.high, "log": self.log, "int": self.integer}


@dataclass(frozen=True)
class Choice:
    """One of these values."""

    values: tuple[Any, ...]

    def as_json(self) -> dict[str, Any]:
        return {"choices": list(self.values)}


Dimension = Range | Choice


@dataclass(frozen=True)
class Search:
    """What the study of an adaptive sweep draws: `trials` elements from `space` by `sampler`, seeded."""

    sampler: str
    trials: int
    space: tuple[tuple[str, Dimension], ...]
    seed: int | None = None  # None: not given, drawn at submit (drawn_seed)
    storage: str | None = None  # the YAML's `storage:` (--study-storage's); None: study.journal
    study: str | None = None  # the YAML's `study_name:` (--study-name's); None: the sweep's own, NAME-ARRAYID

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(key for key, _ in self.space)

    def lines(self) -> list[str]:
        """The search as `--dry-run`, render and submit show it: the sampler, then each key's range or choices."""
        seeded = "" if self.seed is None else f" (seed {self.seed})"
        shown = [f"{self.sampler} search of {self.trials} trials{seeded}, each element's values drawn as it starts:"]
        for key, dim in self.space:
            if isinstance(dim, Range):
                scale = (" (log)" if dim.log else "") + (" integers" if dim.integer else "")
                shown.append(f"{key}: {dim.low}..{dim.high}{scale}")
            else:
                shown.append(f"{key}: one of {', '.join(map(str, dim.values))}")
        return shown

    def as_json(self) -> dict[str, Any]:
        """What the job's trial step reads (runs/study.py): the sampler, seed and space."""
        return {"sampler": self.sampler, "trials": self.trials, "seed": self.seed,
                "space": {key: dimension.as_json() for key, dimension in self.space}}


def dimension(key: str, text: str, source: str, own_keys: bool = False) -> Dimension:
    """`LOW:HIGH`, `LOW:HIGH:log` (a range) or `V1,V2,...` (a choice) for one setting (with `own_keys`, a command's
    sweep: for any key, one that is no setting typed from its values); one line when it is wrong."""
    match = _RANGE.match(text)
    if match is None:
        values = [part.strip() for part in text.split(",") if part.strip()]
        if not values:
            raise SweepError(f"{source}=: no values; give V1,V2,... or a range LOW:HIGH (LOW:HIGH:log)")
        return Choice(tuple(key_value(key, value, source, own_keys) for value in values))
    low_text, high_text, scale = match.groups()
    if scale not in (None, "log"):
        raise SweepError(f"{source}={text}: unknown scale {scale!r}; write LOW:HIGH or LOW:HIGH:log")
    low, high = (key_value(key, value, source, own_keys) for value in (low_text, high_text))
    if not all(isinstance(value, (int, float)) and not isinstance(value, bool) for value in (low, high)):
        raise SweepError(f"{source}={text}: {key} is not a number setting; give its values as V1,V2,...")
    return checked_range(key, low, high, scale == "log", source)


def checked_range(key: str, low: float, high: float, log: bool, source: str) -> Range:
    """A range, refused when LOW > HIGH or, on a log scale, LOW <= 0."""
    shown = f"{low}:{high}{':log' if log else ''}"
    if low > high:
        raise SweepError(f"{source}={shown}: LOW is above HIGH; write the range as {high}:{low}")
    if log and low <= 0:
        raise SweepError(f"{source}={shown}: a log range needs 0 < LOW; give a positive LOW, or drop :log")
    whole = isinstance(low, int) and isinstance(high, int) if not is_setting(key) else integer_setting(key)
    integer = whole and float(low).is_integer() and float(high).is_integer()
    return Range(int(low) if integer else float(low), int(high) if integer else float(high), log, integer)


def integer_setting(key: str) -> bool:
    """Whether a setting takes whole numbers only (batch_size, epochs): its range then draws integers."""
    options = typing.get_args(typing.get_type_hints(TrainConfig)[key]) or (typing.get_type_hints(TrainConfig)[key],)
    return int in options and float not in options


def is_range(text: str) -> bool:
    """Whether a `--sweep` value is a range (LOW:HIGH[:log]) rather than values."""
    return _RANGE.match(text) is not None


def from_options(options: Sequence[str], sampler: str | None, trials: int | None,
                 seed: int | None = None, own_keys: bool = False) -> Search | None:
    """`--sweep` options with `--search`, `--trials` and `--seed` as a Search; None for a plain grid (every key a
    list of values and no sampler, or `--search grid` without a range). `own_keys`: a command's sweep (any key)."""
    space = []
    for option in options:
        key, _, text = option.partition("=")
        space.append((key.strip(), dimension(key.strip(), text, f"--sweep {key.strip()}", own_keys)))
    return checked(space, sampler, trials, checked_seed(seed, "--seed"), "--search", "--trials")


def checked(space: Sequence[tuple[str, Dimension]], sampler: str | None, trials: int | None, seed: int | None,
            sampler_source: str, trials_source: str) -> Search | None:
    """The search, each refusal one line naming the fix; None for a plain grid."""
    ranges = [key for key, value in space if isinstance(value, Range)]
    keys = [key for key, _ in space]
    twice = sorted({key for key in keys if keys.count(key) > 1})
    if twice:
        raise SweepError(f"--sweep {twice[0]}: given twice; give its values or its range once")
    if sampler is not None and sampler not in SAMPLERS:
        raise SweepError(f"{sampler_source} {sampler}: unknown sampler; choose one of {', '.join(SAMPLERS)}")
    if trials is not None and (not isinstance(trials, int) or isinstance(trials, bool) or trials < 1):
        raise SweepError(f"{trials_source} {trials}: give a whole number of trials, 1 or more")
    if sampler in (None, "grid") and not ranges:
        if trials is not None:
            raise SweepError(f"{trials_source} applies to --search tpe|random|cmaes; a grid runs every combination")
        return None
    if sampler == "grid":
        raise SweepError(f"{sampler_source} grid with a range ({', '.join(ranges)}): a grid takes values; give "
                         f"{ranges[0]}=V1,V2,..., or search it with --search tpe|random|cmaes")
    if trials is None:
        raise SweepError(f"{sampler_source} {sampler or 'tpe'}: how many trials? add {trials_source} N")
    return Search(sampler or "tpe", trials, tuple(space), seed)


def from_yaml(body: Any, own_keys: bool = False) -> Search:
    """The YAML `sweep: {search: {sampler: tpe, trials: N, seed: S, space: {KEY: LOW:HIGH | [V1, V2]}}}`, and
    `storage: URL` (as --study-storage), `study_name: NAME` (as --study-name). `own_keys`: a command's sweep."""
    if not isinstance(body, Mapping) or not isinstance(body.get("space"), Mapping) or not body["space"]:
        raise SweepError("sweep search: expected sampler: tpe, trials: N and space: {KEY: LOW:HIGH, KEY: [V1, V2]}")
    unknown = sorted(set(body) - {"sampler", "trials", "seed", "space", "storage", "study_name"})
    if unknown:
        raise SweepError(f"sweep search: unknown key {unknown[0]!r}; it takes sampler, trials, seed, space, "
                         "storage and study_name")
    storage = body.get("storage")
    if storage is not None and (not isinstance(storage, str) or not storage.strip()):
        raise SweepError(f"sweep search storage: {storage!r}: give an RDB URL (sqlite:////shared/path/s.db), or drop "
                         "it for study.journal in the sweep's folder")
    space = [(str(key), dimension(str(key), _text(value), f"sweep search space {key}", own_keys))
             for key, value in body["space"].items()]
    search = checked(space, body.get("sampler", "tpe"), body.get("trials"),
                     checked_seed(body.get("seed"), "sweep search seed:"), "sweep search sampler:",
                     "sweep search trials:")
    if search is None:
        raise SweepError("sweep search sampler: grid: write it as sweep: {grid: {KEY: [V1, V2]}}")
    name = body.get("study_name")
    return replace(search, storage=storage,
                   study=None if name is None else checked_study_name(name, "sweep search study_name:"))


def checked_seed(seed: Any, source: str) -> int | None:
    """A sampler's seed as given (None: not given, drawn at submit), refused in one line unless a whole number
    that numpy's generators take."""
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < SEED_LIMIT):
        raise SweepError(f"{source} {seed!r}: give a whole number from 0 to {SEED_LIMIT - 1}, or leave it out for "
                         "one drawn at submit")
    return seed


def drawn_seed(search: Search) -> Search:
    """The search with its seed: the one given, else one drawn now, at submit (two sweeps, or one submitted
    again, then draw other values; each element's sampler is seeded from it and its index)."""
    return search if search.seed is not None else replace(search, seed=secrets.randbelow(2**31))


def checked_study_name(name: Any, source: str) -> str:
    """A study's name as given (any characters a line holds: it is written as JSON, never as shell words),
    refused in one line when empty, with a control character, or longer than Optuna keeps."""
    if not isinstance(name, str) or not name.strip():
        raise SweepError(f"{source} {name!r}: give the study's name, e.g. lr-search")
    if any(ord(character) < 32 or ord(character) == 127 for character in name) or len(name) > STUDY_NAME_LIMIT:
        raise SweepError(f"{source} {name[:40]!r}: a study's name is one line of at most {STUDY_NAME_LIMIT} "
                         "characters, without control characters")
    return name


def _text(value: Any) -> str:
    """A space entry as --sweep's text: a list is a choice, anything else (LOW:HIGH) as written."""
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)


def check_space(search: Search, base: TrainConfig) -> None:
    """Each end of each range and each choice of a setting, checked as a config is (a type, a range of the setting);
    a command's own keys are no settings (their values typed as they were read)."""
    for key, dim in search.space:
        if not is_setting(key):
            continue
        for value in (dim.low, dim.high) if isinstance(dim, Range) else dim.values:
            try:
                TrainConfig(**{**to_dict(base), key: value})
            except ConfigError as error:
                raise SweepError(f"--sweep {key}: {value}: {error}") from None

