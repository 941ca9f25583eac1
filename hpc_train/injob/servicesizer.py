"""`--data-workers auto` while the ranks run (docs/data_service.md#sizing-itself-data-workers-auto): a thread of the
job body that reads each epoch's input share from the ranks' ledger measures, asks data_service/autosize.py's
`decide`, and adds a worker when it says so (the dispatcher takes new workers at any time).

The side effects stay here: reading `.ledger/ranks-N.json` (the chief's `epochs`, training/goodput.py), starting
a worker (`add`, the job body's: one more srun step, which returns once the worker listens), the decision's line,
and the sizing kept in data_service.json (`auto`) for the next attempt, which starts at the size reached.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from hpc_train.data_service.autosize import Sizing, decide, last_epoch
from hpc_train.runs.goodput import ranks_path
from hpc_train.runs.servicerecord import note_service
from hpc_train.runs.state import read_json_object

POLL = 2.0  # seconds between looks at the ranks' measures (written at each epoch's end, on a shared folder)


class ServiceSizer:
    """start() once the service's first workers listen; stop() before the service ends. `add(index)` starts worker
    `index` (0-based among the service's) and says whether it listens."""

    def __init__(self, run_dir: Path, attempt: int, sizing: Sizing, add: Callable[[int], bool],
                 say: Callable[[str], None], poll: float | None = None, clock: Callable[[], float] = time.time) -> None:
        self.run_dir, self.attempt, self.sizing = Path(run_dir), attempt, sizing
        self.add, self.say, self.poll, self.clock = add, say, POLL if poll is None else poll, clock
        self.stopping = threading.Event()  # (set by stop(): `add` gives up on a worker still starting)
        self._thread = threading.Thread(target=self._watch, name="hpc-train data workers auto", daemon=True)

    def start(self) -> ServiceSizer:
        note_service(self.run_dir, auto=self.sizing.record())
        self._thread.start()
        return self

    def stop(self) -> None:
        """No decision from now on; returns once the thread has seen it, or soon (a worker still starting is left to
        the service's end: its step is among the service's, and the stop file ends it)."""
        self.stopping.set()
        self._thread.join(timeout=self.poll + 5.0)

    def _watch(self) -> None:
        since, seen = self.clock(), 0.0  # epochs that began with the workers running now; the last one decided on
        while not self.stopping.wait(self.poll):
            found = last_epoch(read_json_object(ranks_path(self.run_dir, self.attempt)), since, seen)
            if found is None:
                continue
            seen = found[0]
            since = self.step(found[1], found[2]) or since

    def step(self, share: float, seconds: float | None = None) -> float | None:
        """One epoch's share (and a training step's average seconds) decided on: said, a worker added, the sizing kept;
        when a worker was added, the time from which epochs measure it (it listens)."""
        decision = decide(self.sizing, share, seconds)
        if decision.line is not None:
            self.say(decision.line)
        added = decision.sizing.workers > self.sizing.workers
        self.sizing = decision.sizing
        listening = None
        if added:
            if self.add(self.sizing.workers - 1):
                listening = self.clock()
            elif self.stopping.is_set():  # the service ends with the ranks' step: nothing to say or to keep
                return None
            else:  # (add said why): the size that runs, and no more tries
                self.sizing = replace(self.sizing, workers=self.sizing.workers - 1, before=None, before_seconds=None,
                                      settled=f"worker {self.sizing.workers} did not start")
        note_service(self.run_dir, auto=self.sizing.record())
        return listening
