"""The data service's steps watched while the ranks run (docs/data_service.md#a-data-worker-lost).

A data worker lost mid-run (killed, out of memory, its node's trouble) costs the job a stall, not the job:

- with two or more workers, the dispatcher gives the lost worker's share of the stream to the others once it
  misses its heartbeats (servers.WORKER_TIMEOUT_MS), and the step of the others runs on;
- when the workers' step ends (a lone worker lost, or every worker), the job body starts it again, at most
  RESTARTS times an attempt: the workers register again at the same addresses, and the ranks, which kept asking
  those addresses, read on. Each restart is one line;
- when the dispatcher's step ends (killed, its node's trouble), the job body starts it again at the same address
  with the same journal (fault-tolerant mode): it restores the jobs it served, the workers register again and
  the ranks, which kept asking its address, read on where they were, at most RESTARTS times an attempt.

The ranks wait meanwhile: inside their training steps' `next(iterator)`, so the ledger counts the stall as `input`
(docs/goodput.md), where the job's time went while it waited for its data.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

RESTARTS = 5  # an attempt's restarts of its workers' step: a worker that cannot stay up is not started for ever
POLL = 1.0  # seconds between looks at the workers' srun (a Popen: nothing to wait on with a timeout and a stop)


# Which step, in the lines: its step's name, how it starts again, what could not be started again.
WORKERS = ("workers' step", "", "workers")
DISPATCHER = ("dispatcher's step", " from its journal", "dispatcher")


class WorkerGuard:
    """A thread that starts a step of the service again (`restart()`, a new srun) each time it ends before `stop()`:
    `steps[index]` is the step watched, replaced by each restart, so that the body ends the one running. `step`:
    which one, in words (WORKERS, DISPATCHER)."""

    def __init__(self, steps: list[Any], index: int, restart: Callable[[], Any], say: Callable[[str], None],
                 restarts: int = RESTARTS, poll: float = POLL, step: tuple[str, str, str] = WORKERS) -> None:
        self.steps, self.index, self.restart, self.say = steps, index, restart, say
        self.restarts, self.poll, self.done = restarts, poll, 0
        self.name, self.how, self.what = step
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._watch, name=f"hpc-train-data-{self.name}", daemon=True)

    def start(self) -> WorkerGuard:
        self._thread.start()
        return self

    def stop(self) -> None:
        """No restart from now on (the body ends the service next); returns once the thread has seen it."""
        self._stopping.set()
        self._thread.join(timeout=self.poll + 30.0)

    def _watch(self) -> None:
        while not self._stopping.wait(self.poll):
            code = self.steps[self.index].poll()
            if code is None:
                continue
            if self.done >= self.restarts:
                self.say(f"warning: the data service's {self.name} ended (exit {code}) while the ranks ran, "
                         f"{self.done} restart(s) already: not started again; the ranks wait on the service until "
                         "the job's hang watchdog or time limit ends the attempt")
                return
            self.done += 1
            try:
                self.steps[self.index] = self.restart()
            except Exception as error:  # noqa: BLE001 - srun refused: said, and the ranks' step goes on
                self.say(f"warning: the data service's {self.what} could not be started again "
                         f"({type(error).__name__}: {error})")
                return
            self.say(f"data service: its {self.name} ended (exit {code}) while the ranks ran; started again{self.how} "
                     f"(restart {self.done} of at most {self.restarts}); the ranks' input waits meanwhile")
