"""The job body's side of tracking: the job's run opened before the ranks start, each epoch logged beside the
step, the run closed as the job ended. The tracker is never worth a training: whatever it does (missing, slow,
dead, refusing) is one warning line in the job log, and the job goes on as if it were not asked for.

A thread beside the step logs each epoch as metrics.json gains it: the ranks never wait on the tracker, and no
rank but the body's process ever talks to it. Opening and closing are bounded too (START_SECONDS,
CLOSE_SECONDS). One lock keeps that thread and the run's end (finish, or kill from Slurm's SIGTERM) from logging
the same epochs twice, or from writing tracking.json over each other. A sweep element's run is a child of the
sweep's run, which the first element to start makes.
"""

from __future__ import annotations

import fcntl
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from hpc_train.runs import attempts, study
from hpc_train.runs.folders import PROVENANCE, RECORD, element_id, run_folder
from hpc_train.runs.metrics import metrics_path
from hpc_train.runs.secret import PRIVATE_FOLDER
from hpc_train.runs.state import read_json_object, read_state, read_tracking, write_tracking
from hpc_train.tracking import mlflow_run
from hpc_train.tracking.settings import (TrackSettings, absolute_uri, final_status, params_of, resolve,
                                         status_from_folder, status_from_slurm, tags_of)

POLL_SECONDS = 2.0  # how often the thread looks at metrics.json (a stat; it reads it when it changed)
START_SECONDS = 30.0  # at most this long before the step starts without a tracked run
CLOSE_SECONDS = 30.0  # at most this long after the step for the last epochs, the artifacts and the status


class JobTracking:
    """One attempt's tracking: `start` before the step (the ranks' variables), `finish` after it."""

    def __init__(self, run_dir: Path, settings: TrackSettings, say: Callable[[str], None],
                 env: Mapping[str, str]) -> None:
        # absolute: the job body runs in the code snapshot, not where the run folder's relative path starts
        self.run_dir, self.settings, self.say, self.env = Path(run_dir).resolve(), settings, say, env
        self.record = read_json_object(self.run_dir / RECORD)
        self.since = time.time()
        self.mlflow: Any = None
        self.run_id: str | None = None
        self._warned = False
        self._stop = threading.Event()
        self._lock = threading.Lock()  # around each log_epochs and write_tracking: one logger, one writer at a time
        self.finishing = False  # finish has begun: Slurm's SIGTERM no longer ends the run (tracked.py)
        self._thread: threading.Thread | None = None
        self._seen: int | None = None

    @classmethod
    def for_job(cls, run_dir: Path, uri: str | None, experiment: str | None, env: Mapping[str, str],
                say: Callable[[str], None]) -> JobTracking:
        """The tracking of the job in `run_dir` (its store and experiment resolved: settings.resolve). A relative
        store (a job submitted before submit made it absolute, $MLFLOW_TRACKING_URI) is the submit directory's, as
        provenance.json says it, not the code snapshot's the job runs in (else: this directory's)."""
        name = read_json_object(Path(run_dir) / RECORD).get("name") or Path(run_dir).name.rpartition("-")[0]
        settings = resolve(uri, experiment, env, Path(run_dir).parent, str(name))
        base = read_json_object(Path(run_dir) / PROVENANCE).get("submit_dir") or Path.cwd()
        return cls(run_dir, replace(settings, uri=absolute_uri(settings.uri, Path(base))), say, env)

    def start(self) -> dict[str, str]:
        """Open the job's run (made once, found again by a requeued or retried attempt) and start logging;
        the variables for every rank, {} when the tracker is out of reach."""
        # An attempt of a job that goes on: an earlier one's end (a SIGTERM read as a cancel) no longer stands,
        # neither for the sweep's parent (close_parent_when_done) nor for `track sync`, tracker or not.
        write_tracking(self.run_dir, closed=False, verdict=None, status=None)
        if not read_tracking(self.run_dir).get("run_id"):  # where it goes, for `track sync` if it cannot now
            write_tracking(self.run_dir, uri=self.settings.uri, experiment=self.settings.experiment)
        if not bounded(self._open, START_SECONDS):
            self.warn(f"no answer in {START_SECONDS:.0f} s")
        if self.run_id is None:
            return {}
        self._thread = threading.Thread(target=self._follow, name="hpc-train tracking", daemon=True)
        self._thread.start()
        return self.settings.environment(self.run_id)

    def finish(self, step_code: int, job_code: int) -> None:
        """After the step (and the epilogue): the last epochs, and the run's end when the job ended; all of it within
        CLOSE_SECONDS (a retry the epilogue requeued cannot start while the body runs)."""
        self.finishing = True
        self._stop.set()
        deadline = time.monotonic() + CLOSE_SECONDS
        if self._thread is not None:
            self._thread.join(CLOSE_SECONDS)
        stuck = self._thread is not None and self._thread.is_alive()  # on the tracker, the lock held: no use waiting
        status = final_status(step_code, job_code, read_state(self.run_dir), self.since)
        if status is not None:
            self._write_verdict(status, 0.0 if stuck else left(deadline))
        if self.run_id is None:
            return
        if not bounded(lambda: self._close(status), left(deadline)):
            self.warn(f"no answer in {CLOSE_SECONDS:.0f} s at the job's end")

    def kill(self, seconds: float) -> None:
        """Slurm cancelled the job (or ended it at its time limit): the run ends KILLED now, before the SIGKILL that
        follows; its status first, then what `seconds` (all of it, the wait for the lock too) allow of the last
        epochs, the tags and the artifacts (after the thread's epochs in progress, under the lock: each epoch
        logged once)."""
        deadline = time.monotonic() + seconds
        self._stop.set()
        self._write_verdict("KILLED", seconds / 3)
        if self.run_id is None:
            return

        def close() -> None:
            try:
                self.mlflow.set_terminated(str(self.run_id), "KILLED")  # first: it touches no file, takes no lock
            except Exception as error:  # noqa: BLE001
                return self.warn(error)
            if self._thread is not None:
                self._thread.join(seconds / 3)
            self._close("KILLED")

        if not bounded(close, left(deadline)):
            self.warn(f"no answer in {seconds:.0f} s as the job was cancelled")

    def _write_verdict(self, status: str, seconds: float) -> None:
        """The run's end in tracking.json, for `track sync` whatever the tracker does now: under the lock, unless the
        thread holds it past `seconds` (stuck on the tracker: its own write re-reads the file, keeping this one)."""
        locked = self._lock.acquire(timeout=seconds)  # (0: only if free now)
        try:
            write_tracking(self.run_dir, verdict=status)
        finally:
            if locked:
                self._lock.release()

    def warn(self, why: Any) -> None:
        """One line in the job log, once per attempt."""
        if self._warned:
            return
        self._warned = True
        text = str(why).strip().splitlines()[0][:200] if str(why).strip() else type(why).__name__
        job = self.record.get("job_id", "ID")
        self.say(f"hpc-train: warning: MLflow at {self.settings.uri}: {text}; the job goes on without it "
                 f"(hpc-train track sync {job} uploads its run later)")

    def upload(self, slurm_state: Callable[[str], str] | None = None) -> str | None:
        """The run folder as it is, now (`hpc-train track sync`): the run made or found, the epochs not yet
        logged, and its end when the job ended (the body's verdict, else state.json's, else what
        `slurm_state(JOB_ID)` says of the job: a body ended before it could say); that end, or None while the job
        goes on. Failures raise: this is what the user asked for. A run already closed keeps its end, status and
        tags (said where the job ran): only what it lacks is added (mlflow_run.fill_closed_run)."""
        self._open_or_raise(reopen=False)
        held = mlflow_run.ended_status(self.mlflow, str(self.run_id))
        if held is not None:
            with self._lock:
                mlflow_run.fill_closed_run(self.mlflow, str(self.run_id), self.run_dir, held, self._tags())
            return held
        known = read_tracking(self.run_dir)
        status = status_from_folder(read_state(self.run_dir), known.get("verdict"))
        if status is None and slurm_state is not None and self.record.get("job_id"):
            status = status_from_slurm(slurm_state(str(self.record["job_id"])))
        self._close(status, quietly=False)
        return status

    def _open(self) -> None:
        try:
            self._open_or_raise()
        except Exception as error:  # noqa: BLE001 - any failure of the tracker is a warning
            self.warn(error)

    def _open_or_raise(self, reopen: bool = True) -> None:
        self.mlflow = mlflow_run.client(self.settings)
        tags = {**self._tags(), **self._parent()}
        name = Path(str(self.record.get("folder") or self.run_dir)).name
        self.run_id = mlflow_run.open_run(self.mlflow, self.settings, self.run_dir, name, tags,
                                          params_of(job_settings(self.run_dir), self.record), reopen)

    def _follow(self) -> None:
        while not self._stop.wait(POLL_SECONDS):
            self._log_new()

    def _log_new(self) -> None:
        try:
            changed = metrics_path(self.run_dir).stat().st_mtime_ns
        except OSError:
            return
        if changed == self._seen:
            return
        try:
            with self._lock:
                if self._stop.is_set():  # the run's end logs them now
                    return
                mlflow_run.log_epochs(self.mlflow, str(self.run_id), self.run_dir)
            self._seen = changed
        except Exception as error:  # noqa: BLE001
            self.warn(error)

    def _close(self, status: str | None, quietly: bool = True) -> None:
        with self._lock:
            self._close_locked(status, quietly)

    def _close_locked(self, status: str | None, quietly: bool) -> None:
        try:
            if status is None:  # requeued or retried: the next attempt goes on with this run
                mlflow_run.log_epochs(self.mlflow, str(self.run_id), self.run_dir)
                mlflow_run.log_ledger(self.mlflow, str(self.run_id), self.run_dir)  # this attempt's, counted
                return
            mlflow_run.close_run(self.mlflow, str(self.run_id), self.run_dir, status, self._tags())
            close_parent_when_done(self.mlflow, self.record, self.run_dir)
        except Exception as error:  # noqa: BLE001
            if not quietly:
                raise
            self.warn(error)

    def _tags(self) -> dict[str, str]:
        state = read_state(self.run_dir)
        history = attempts.recorded(state)
        said = [attempts.describe(attempt, index + 1) for index, attempt in enumerate(history)]
        # The nodes: the run folder's (a heterogeneous job's every component; `track sync` runs on no node).
        nodes = attempts.last_nodes(state) or self.env.get("SLURM_JOB_NODELIST")
        return tags_of(self.record, state, nodes, said, self.run_dir, read_json_object(self.run_dir / PROVENANCE))

    def _parent(self) -> dict[str, str]:
        """A sweep element's tag naming its sweep's run ({} for a job of its own)."""
        sweep = self.record.get("sweep")
        if not sweep or sweep == self.record.get("job_id"):
            return {}
        return {"mlflow.parentRunId": sweep_run(self.mlflow, self.settings, study.sweep_folder(self.run_dir)),
                "hpc_train.sweep": str(sweep)}


def job_settings(run_dir: Path) -> dict[str, Any]:
    """The job's training settings (config.yaml; a command's job has none)."""
    import yaml

    try:
        found = yaml.safe_load((Path(run_dir) / "config.yaml").read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def sweep_run(mlflow: Any, settings: TrackSettings, folder: Path) -> str:
    """The sweep's run id: made by the first element to ask (the elements start together: under a lock)."""
    folder.mkdir(parents=True, exist_ok=True, mode=PRIVATE_FOLDER)
    with open(folder / ".tracking.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        known = read_tracking(folder)
        if known.get("run_id") and known.get("uri") == settings.uri:
            return str(known["run_id"])
        run = mlflow.create_run(mlflow_run.experiment_id(mlflow, settings), run_name=folder.name,
                                tags={"hpc_train.sweep": folder.name.rpartition("-")[2]})
        write_tracking(folder, run_id=str(run.info.run_id), uri=settings.uri, experiment=settings.experiment)
        return str(run.info.run_id)


def close_parent_when_done(mlflow: Any, record: Mapping[str, Any], run_dir: Path) -> None:
    """The sweep's run ends FINISHED once every element's run has ended (the last element to end closes it)."""
    if not record.get("sweep") or record.get("sweep") == record.get("job_id"):
        return
    # from the element's absolute folder, not record["folder"] (relative to the submit directory, not the cwd)
    folder = study.sweep_folder(Path(run_dir).resolve())
    sweep = read_json_object(folder / RECORD)
    count = len(sweep.get("elements") or [])
    elements = [run_folder(folder.parent, str(record.get("name")), element_id(str(record["sweep"]), index))
                for index in range(count)]
    with open(folder / ".tracking.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two elements that end together: one of them sees both closed
        parent = read_tracking(folder).get("run_id")
        if parent and count and all(read_tracking(element).get("closed") for element in elements):
            mlflow.set_terminated(str(parent), "FINISHED")


def bounded(call: Callable[[], None], seconds: float) -> bool:
    """call() in a daemon thread, waited on at most `seconds`; whether it returned in time."""
    thread = threading.Thread(target=call, name="hpc-train tracking", daemon=True)
    thread.start()
    thread.join(seconds)
    return not thread.is_alive()


def left(deadline: float) -> float:
    """The seconds left until `deadline` (time.monotonic's), none below 0."""
    return max(0.0, deadline - time.monotonic())
