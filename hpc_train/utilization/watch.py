"""The job body's watch: a thread beside the step that says, in the job's log, each GPU of the job that idles
(one line when it has idled for the threshold, naming its node and ranks) and each that is busy again.

It reads what the nodes' samplers append to the run folder (files.py), each file from where it stopped, and
folds the new samples into each GPU's state (idle.py, pure); so it is cheap for a long job.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

from hpc_train.utilization import files
from hpc_train.utilization.idle import GpuState, Key, busy_again_line, fold, idle_line
from hpc_train.utilization.settings import Sampling
from hpc_train.version import PREFIX



class IdleWatch:
    """start() beside the step, stop() once it ended; `say` writes a line to the job's log."""

    def __init__(self, run_dir: Path, sampling: Sampling,
                 say: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True)) -> None:
        self.run_dir, self.sampling, self._say = Path(run_dir), sampling, say
        self._offsets: dict[Path, int] = {}
        self._states: dict[Key, GpuState] = {}
        self._named: dict[Key, float] = {}  # GPUs said idle: when their idle began
        self._stopped = threading.Event()

    def start(self) -> "IdleWatch":
        if self.sampling.on:
            threading.Thread(target=self._run, name="hpc-train idle watch", daemon=True).start()
        return self

    def stop(self) -> None:
        self._stopped.set()

    def look(self) -> list[str]:
        """Read the new samples; say (and return) the lines they call for."""
        for path in files.node_files(self.run_dir):
            for row in files.parse_rows(self._new_lines(path)):
                self._states = fold(self._states, row)
        lines = []
        for key, state in sorted(self._states.items()):
            if state.idle and key not in self._named:
                self._named[key] = state.idle_since or state.last
                lines.append(idle_line(state))
            elif key in self._named and state.idle_since is None:
                lines.append(busy_again_line(state, state.last - self._named.pop(key)))
        for line in lines:
            self._say(f"{PREFIX}: {line}")
        return lines

    def _new_lines(self, path: Path) -> list[str]:
        """The whole lines appended to `path` since the last look (a line being written waits for the next)."""
        try:
            with path.open("rb") as source:
                source.seek(self._offsets.get(path, 0))
                data = source.read()
        except OSError:
            return []
        whole = data[:data.rfind(b"\n") + 1]
        self._offsets[path] = self._offsets.get(path, 0) + len(whole)
        return whole.decode(errors="replace").splitlines()

    def _run(self) -> None:
        while not self._stopped.wait(self.sampling.every):
            try:
                self.look()
            except Exception:  # noqa: BLE001 - a file system that stuttered: the next look reads on (a watch
                continue  # must never end, or clutter, the job's log)


def watch_idle(run_dir: Path, environ: Mapping[str, str] | None = None) -> IdleWatch:
    """The body's watch for the job's run folder, started (not when sampling is off or set wrong: the ranks say)."""
    import os

    from hpc_train.errors import HpcTrainError

    try:
        sampling = Sampling.from_environment(os.environ if environ is None else environ)
    except HpcTrainError:
        sampling = Sampling(every=0)
    return IdleWatch(run_dir, sampling).start()
