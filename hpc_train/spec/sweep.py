"""A sweep: the settings of many runs of one job, as a grid or a random search (pure: values in, elements out).

Groundwork for `--sweep` and YAML `sweep:` (issue 18): what each element of a
Slurm job array will run, refused before anything is queued when it cannot
be: an unknown key, a value of the wrong type or out of range, an empty list,
a key given twice, more elements than the site's MaxArraySize, or a `{KEY}`
in a command that no sweep key defines.

A trainer's sweep varies its settings (every key one of TrainConfig's). A user's command has keys of its own
(issue 46): in a command's sweep any key is legitimate, whether the command names it as `{KEY}` or reads
HPC_TRAIN_SWEEP_<KEY> from its environment alone; a key that is a setting is typed and checked as the setting, any
other is typed from its values (`own_value`: a whole number, a number, else text) and stays out of config.yaml
(`settings`).

- Grid: `KEY=V1,V2,...` per key; every combination, the first key slowest.
- Random: `trials` draws from a `space` of `loguniform(a, b)`, `uniform(a, b)`,
  `randint(a, b)` (both ends included) or `choice(v1, v2, ...)`, seeded: the
  same seed gives the same trials.
"""

from __future__ import annotations

import itertools
import math
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from hpc_train.config import ConfigError, TrainConfig, replace, setting_value

_DISTRIBUTION = re.compile(r"^\s*(loguniform|uniform|randint|choice)\s*\((.*)\)\s*$", re.S)
_PLACEHOLDER = re.compile(r"\{(\w+)\}")
# A command's own key: a `{KEY}` and the end of an environment variable's name (HPC_TRAIN_SWEEP_<KEY>).
_OWN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


# Settings a sweep cannot vary: the job's request, or its run folder, decides them.
JOB_KEYS = {"strategy": "the strategy is the job's (--strategy), the same for every element: sweep it as "
                        "separate jobs",
            "num_ps": "the ps count is the job's (--num-ps): sweep it as separate jobs",
            "output_dir": "each element writes its own run folder (runs/NAME-ARRAYID_I/)"}


class SweepError(ConfigError):
    """A sweep that cannot run as given."""


@dataclass(frozen=True)
class Sweep:
    keys: tuple[str, ...]
    elements: tuple[dict[str, Any], ...]
    # An adaptive search (spec/search.py's Search): each element asks the sweep's study for its values when it
    # starts, so `elements` are empty until then.
    search: Any = None
    # The study's RDB URL (--study-storage); None: study.journal in the sweep's folder.
    storage: str | None = None
    # The study's name in it (--study-name: shared with other sweeps, created or continued); None: the sweep's own,
    # named after its folder (NAME-ARRAYID).
    study: str | None = None
    # A random sweep's seed (`sweep: random: seed:`, else drawn at submit and shown): the same one draws the same.
    seed: int | None = None

    def __len__(self) -> int:
        return len(self.elements)


def is_setting(key: str) -> bool:
    """Whether a sweep key is one of the trainer's settings (else a command's own)."""
    return key in TrainConfig.valid_keys()


def settings(values: Mapping[str, Any]) -> dict[str, Any]:
    """An element's values that are settings, what its config.yaml takes (a command's own keys are not)."""
    return {key: value for key, value in values.items() if is_setting(key)}


def own_value(text: str) -> int | float | str:
    """A command's own key's value, typed from its text: a whole number, a number, else the text."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def key_value(key: str, text: str, source: str, own_keys: bool = False) -> Any:
    """One swept value from its text: a setting's as `--set` reads it; with `own_keys` (a command's sweep) a key
    that is no setting typed from its text (own_value). A trainer's sweep refuses a key that is no setting."""
    if not own_keys or is_setting(key):
        return setting_value(key, text, source)
    if not _OWN_KEY.match(key):
        raise SweepError(f"{source}: {key!r} is not a name a command's sweep can export; use letters, digits and _ "
                         f"(it becomes {{KEY}} and HPC_TRAIN_SWEEP_KEY)")
    return own_value(text)


def grid_axes(options: Sequence[str], own_keys: bool = False) -> dict[str, list[Any]]:
    """`--sweep KEY=V1,V2,...` options as key -> typed values, in the order given; `own_keys`: a command's sweep
    (any key)."""
    axes: dict[str, list[Any]] = {}
    for option in options:
        key, equals, text = option.partition("=")
        key = key.strip()
        if not equals or not key:
            raise SweepError(f"--sweep {option!r}: expected KEY=V1,V2,... (e.g. --sweep learning_rate=0.01,0.001)")
        if key in axes:
            raise SweepError(f"--sweep {key}: given twice; list all its values in one --sweep {key}=V1,V2,...")
        values = [part.strip() for part in text.split(",") if part.strip()]
        if not values:
            raise SweepError(f"--sweep {key}=: no values; give at least one, e.g. --sweep {key}=V1,V2")
        axes[key] = [key_value(key, value, f"--sweep {key}", own_keys) for value in values]
    return axes


def grid(axes: Mapping[str, Sequence[Any]]) -> Sweep:
    """Every combination of the axes' values, the first key varying slowest."""
    keys = tuple(axes)
    return Sweep(keys, tuple(dict(zip(keys, values)) for values in itertools.product(*axes.values())))


def random_search(space: Mapping[str, str], trials: int, seed: int) -> Sweep:
    """`trials` elements drawn from the space's distributions with this seed."""
    if not isinstance(trials, int) or isinstance(trials, bool) or trials < 1:
        raise SweepError(f"sweep random trials: {trials!r}; give a whole number of 1 or more")
    if not space:
        raise SweepError("sweep random space: empty; give at least one KEY: loguniform(a, b) (or uniform, randint, "
                         "choice)")
    draws = {key: _distribution(key, text) for key, text in space.items()}
    rng = random.Random(seed)
    return Sweep(tuple(space), tuple({key: draw(rng) for key, draw in draws.items()} for _ in range(trials)),
                 seed=seed)


def _distribution(key: str, text: Any) -> Any:
    match = _DISTRIBUTION.match(str(text))
    if match is None:
        raise SweepError(f"sweep random space {key}: {text!r}; expected loguniform(a, b), uniform(a, b), randint(a, b) "
                         "or choice(v1, v2, ...)")
    kind, arguments = match.groups()
    try:
        values = [_number(value) for value in yaml.safe_load(f"[{arguments}]")]
    except (yaml.YAMLError, TypeError):
        values = None
    if not values:
        raise SweepError(f"sweep random space {key}: {text!r} has no values")
    if kind == "choice":
        return lambda rng: rng.choice(values)
    if len(values) != 2 or not all(isinstance(value, (int, float)) for value in values) or values[0] >= values[1]:
        raise SweepError(f"sweep random space {key}: {text!r}; {kind} takes two numbers, low < high")
    low, high = values
    if kind == "loguniform":
        if low <= 0:
            raise SweepError(f"sweep random space {key}: {text!r}; loguniform needs 0 < low < high")
        return lambda rng: math.exp(rng.uniform(math.log(low), math.log(high)))
    if kind == "randint":
        return lambda rng: rng.randint(int(low), int(high))
    return lambda rng: rng.uniform(low, high)


def _number(value: Any) -> Any:
    """YAML 1.1 reads `1e-4` as text: the number it means."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def from_yaml(section: Any, own_keys: bool = False, unseeded: int = 0) -> Sweep:
    """The YAML `sweep:` section: `grid: {KEY: [V1, V2]}` or `random: {trials: N, seed: S, space: {...}}`;
    `own_keys`: a command's sweep (any key); `unseeded`: a random sweep's seed where it gives none (the caller's,
    drawn at submit)."""
    if not isinstance(section, Mapping) or len(section) != 1 or next(iter(section)) not in ("grid", "random"):
        raise SweepError("sweep: expected 'grid: {KEY: [V1, V2, ...]}', 'random: {trials: N, seed: S, "
                         "space: {KEY: loguniform(a, b)}}' or 'search: {sampler: tpe, trials: N, space: {KEY: "
                         "LOW:HIGH}}'")
    (kind, body), = section.items()
    if kind == "grid":
        if not isinstance(body, Mapping) or not body:
            raise SweepError("sweep grid: expected KEY: [V1, V2, ...] lines")
        return grid(grid_axes([f"{key}={','.join(map(str, _as_list(key, values)))}" for key, values in body.items()],
                              own_keys))
    if not isinstance(body, Mapping) or not isinstance(body.get("space"), Mapping):
        raise SweepError("sweep random: expected trials: N, seed: S and space: {KEY: distribution}")
    seed = body.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise SweepError(f"sweep random seed: {seed!r}; give a whole number of 0 or more, or leave it out for one "
                         "drawn at submit")
    return random_search(body["space"], body.get("trials", 0), unseeded if seed is None else seed)


def _as_list(key: str, values: Any) -> list[Any]:
    if not isinstance(values, list) or not values:
        raise SweepError(f"sweep grid {key}: expected a list of values, e.g. {key}: [0.01, 0.001]")
    return values


def check(sweep: Sweep, base: TrainConfig, max_array_size: int | None = None,
          own_keys: bool = False) -> list[TrainConfig]:
    """Every element's whole config, each checked as a config is (types, ranges); one line for the first that
    fails, naming the element and the key. `own_keys`: a command's sweep, whose keys that are no settings stay
    out of its config."""
    if max_array_size is not None and len(sweep) > max_array_size:
        raise SweepError(f"the sweep has {len(sweep)} elements, more than this site's MaxArraySize ({max_array_size}); "
                         "sweep fewer values, or split it into several sweeps")
    configs = []
    for index, values in enumerate(sweep.elements):
        try:
            configs.append(replace(base, **(settings(values) if own_keys else values)))
        except ConfigError as error:
            shown = ", ".join(f"{key}={value}" for key, value in values.items())
            raise SweepError(f"sweep element {index} ({shown}): {error}") from None
    return configs


def substitute(command: Sequence[str], values: Mapping[str, Any]) -> list[str]:
    """The command with each `{KEY}` replaced by the element's value; a `{KEY}` no sweep key defines is refused."""
    missing = sorted({key for word in command for key in _PLACEHOLDER.findall(word)} - set(values))
    if missing:
        raise SweepError(f"the command uses {', '.join('{' + key + '}' for key in missing)}, which no --sweep "
                         "defines; add --sweep KEY=V1,V2 for it, or write it out")
    return [_PLACEHOLDER.sub(lambda match: value_text(values[match.group(1)]), word) for word in command]


def value_text(value: Any) -> str:
    """A swept value as a command and the environment get it: floats to 6 significant digits."""
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def table(sweep: Sweep, more: Sequence[Sequence[str]] = ()) -> list[str]:
    """The elements as `--dry-run` and `status` show them: a header, then a row per element, columns aligned;
    `more`: extra columns, their header first, then a row per element. A search: its space (values come later)."""
    if sweep.search is not None:
        return sweep.search.lines() + ([f"study: {sweep.study} (shared, created or continued)"] if sweep.study else [])
    rows = [["INDEX", *sweep.keys]] + [[str(index), *(value_text(values[key]) for key in sweep.keys)]
                                       for index, values in enumerate(sweep.elements)]
    rows = [[*row, *extra] for row, extra in zip(rows, more)] if more else rows
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
