"""A job's tf.data service, as values (pure): how many data workers, where they run, how many CPUs each.

`submit --data-workers N [--data-partition P] [--data-cpus C]`, or the YAML's `job: {data_service: {workers: N,
partition: P, cpus: C}}`, asks for TensorFlow's data service beside the job's ranks: a dispatcher and N workers
that run the input pipeline off the ranks' own CPUs (docs/data_service.md). The login side builds a DataService,
the job line carries it (`hpc-train job --data-workers N ...`), the job body starts the processes.

`--data-workers auto` (`workers: auto`) sizes the service as the job runs: it starts with one worker and the job
body adds more while the ranks wait on their input (data_service/autosize.py); the job's port window holds
AUTO_MOST workers' ports from the start.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hpc_train.errors import HpcTrainError

# Keys of the YAML's `job: {data_service: {...}}` and what each is (the flag that says it on the command line).
YAML_KEYS = {"workers": "the data workers, 1 or more, or auto (--data-workers N|auto)",
             "partition": "the CPU partition they run on, as a component of a heterogeneous job (--data-partition P)",
             "cpus": "CPUs of each data worker, 1 or more (--data-cpus C)"}
_PARTITION = re.compile(r"^[A-Za-z0-9_.-]+$")
AUTO = "auto"
# `auto`'s most workers: their ports are in the job's window from the start (a window of 16 for up to 6 ranks);
# the job's CPUs beside its ranks may allow fewer (data_service/autosize.py: worker_limit).
AUTO_MOST = 8


class DataServiceError(HpcTrainError):
    """A data service that cannot be: one line, naming the value and the fix."""


@dataclass(frozen=True)
class DataService:
    """The job's data service: a dispatcher and `workers` workers of `cpus` CPUs each, on the job's own nodes
    (`partition` None), else on nodes of `partition`; `auto`: `workers` is where it starts (1), and it grows."""

    workers: int
    partition: str | None = None
    cpus: int = 1
    auto: bool = False

    def __post_init__(self) -> None:
        for flag, value in (("--data-workers", self.workers), ("--data-cpus", self.cpus)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise DataServiceError(f"{flag} {value!r}: must be a whole number of 1 or more (no data service: "
                                       "leave --data-workers out)")
        if self.partition is not None and not _PARTITION.match(self.partition):
            raise DataServiceError(f"--data-partition {self.partition!r}: one partition's name, e.g. cpu")
        if self.partition is not None and self.auto:
            # A component's tasks are fixed at submit; auto grows the service on the job's own nodes.
            raise DataServiceError(f"--data-workers auto with --data-partition {self.partition}: the service's "
                                   "partition holds as many workers as asked at submit; give a number (--data-workers "
                                   "N), or leave --data-partition out to size it on the job's own nodes")

    @property
    def most(self) -> int:
        """The most workers it may run: `workers`, or AUTO_MOST when it sizes itself."""
        return AUTO_MOST if self.auto else self.workers

    @property
    def component(self) -> bool:
        """Whether the service runs on nodes of its own partition: one more component of a heterogeneous job (the
        last one, after the ranks'), its tasks the dispatcher and the workers (spec/directives.py)."""
        return self.partition is not None

    @property
    def processes(self) -> int:
        """The service's processes at most: its dispatcher and its workers (each takes a port of the job's window)."""
        return 1 + self.most

    def cpus_per_node(self, nodes: int) -> int:
        """The CPUs its workers take on each of a job's `nodes` nodes beside the ranks (pure): srun places them
        cyclic over the job's nodes, so ceil(workers / nodes) on a node, `cpus` each (`auto`: the one it starts
        with); the dispatcher, which only hands out the dataset's pieces, none. 0 on a partition of its own."""
        if self.component:
            return 0
        return -(-self.workers // max(1, nodes)) * self.cpus

    @property
    def asked(self) -> str:
        """--data-workers as asked: N, or auto."""
        return AUTO if self.auto else str(self.workers)

    def job_line_options(self) -> list[str]:
        """The job line's words for it (injob/jobline.py reads them back)."""
        return ["--data-workers", self.asked, "--data-cpus", str(self.cpus),
                *(("--data-partition", self.partition) if self.partition else ())]

    def words(self) -> str:
        """The service in words, for the start line and the script's header."""
        where = f"on partition {self.partition}" if self.partition else "beside the ranks"
        count = f"auto-sized data workers (1 to {AUTO_MOST})" if self.auto else f"{self.workers} data worker(s)"
        return f"tf.data service: {count} of {self.cpus} CPU(s) {where}"


def of_words(workers: Any, partition: str | None = None, cpus: Any = 1) -> DataService:
    """The service --data-workers N|auto and the rest name (text from a flag or the job line, or the YAML's); one
    line for a value that cannot be."""
    if isinstance(workers, str) and workers.strip().lower() == AUTO:
        return DataService(1, partition, whole_number("--data-cpus", cpus), auto=True)
    return DataService(whole_number("--data-workers", workers), partition, whole_number("--data-cpus", cpus))


def whole_number(flag: str, value: Any) -> int:
    """`value` as a whole number (text from a flag, or the YAML's); one line naming `flag` when it is not."""
    also = ", or auto" if flag == "--data-workers" else ""
    if isinstance(value, bool):
        raise DataServiceError(f"{flag} {value!r}: must be a whole number of 1 or more{also}")
    try:
        return int(str(value).strip())
    except ValueError:
        raise DataServiceError(f"{flag} {value!r}: must be a whole number of 1 or more{also}") from None


def from_settings(workers: Any, partition: str | None, cpus: Any, section: Mapping[str, Any] | None,
                  source: str = "the YAML") -> DataService | None:
    """The service the flags ask for, else the YAML's `data_service:` mapping (a flag given wins over its key);
    None when neither names workers. One line for a flag or key without workers, or a value that is wrong."""
    section = dict(section or {})
    unknown = sorted(set(section) - set(YAML_KEYS))
    if unknown:
        raise DataServiceError(f"{source}: job: data_service: {unknown[0]!r} is not one of its keys; known: "
                               + "; ".join(f"{key} ({what})" for key, what in YAML_KEYS.items()))
    workers = workers if workers is not None else section.get("workers")
    partition = partition if partition is not None else section.get("partition")
    cpus = cpus if cpus is not None else section.get("cpus")
    if workers is None:
        given = [flag for flag, value in (("--data-partition", partition), ("--data-cpus", cpus)) if value is not None]
        if given:
            raise DataServiceError(f"{given[0]} applies to a job's data service: add --data-workers N")
        return None
    if partition is not None and not isinstance(partition, str):
        raise DataServiceError(f"--data-partition {partition!r}: one partition's name, e.g. cpu")
    return of_words(workers, partition, 1 if cpus is None else cpus)
