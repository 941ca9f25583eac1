"""What the job body tells every rank of its data service, in the environment (pure).

- `HPC_TRAIN_DATA_SERVICE`: the dispatcher's address, `grpc://HOST:PORT` (a user's command reads it too);
- `HPC_TRAIN_DATA_SERVICE_JOB`: the service's job name, the same in every rank of an attempt, so that the ranks
  share one stream of elements instead of each reading the whole dataset;
- `HPC_TRAIN_DATA_SERVICE_MODE`: TensorFlow's processing mode, `distributed_epoch`: each element of the dataset is
  produced by one data worker and read by one rank, in the order the workers finish it (not the dataset's order);
- `HPC_TRAIN_DATA_SERVICE_WORKERS`: the data workers, among which a resumed stream's skip is shared
  (`skip_per_worker`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

ADDRESS = "HPC_TRAIN_DATA_SERVICE"
JOB_NAME = "HPC_TRAIN_DATA_SERVICE_JOB"
MODE = "HPC_TRAIN_DATA_SERVICE_MODE"
WORKERS = "HPC_TRAIN_DATA_SERVICE_WORKERS"
PROTOCOL = "grpc"
DISTRIBUTED_EPOCH = "distributed_epoch"
# The run folder's subfolder of the dispatcher's journal (its work_dir, fault-tolerant mode): the service's state,
# found again by the next attempt's dispatcher.
WORK_DIR = "data_service"


@dataclass(frozen=True)
class ServiceEnv:
    """What a rank reads: where the dispatcher is, the job name the ranks share, the processing mode."""

    address: str
    job_name: str
    mode: str = DISTRIBUTED_EPOCH
    workers: int = 1

    @classmethod
    def from_environ(cls, env: Mapping[str, str]) -> ServiceEnv | None:
        """The job's data service, None when the job has none (HPC_TRAIN_DATA_SERVICE unset or empty)."""
        address = env.get(ADDRESS, "").strip()
        if not address:
            return None
        workers = env.get(WORKERS, "").strip()
        return cls(address, env.get(JOB_NAME, "").strip() or "hpc-train", env.get(MODE, "").strip() or DISTRIBUTED_EPOCH,
                   int(workers) if workers.isdigit() and int(workers) > 0 else 1)

    def environ(self) -> dict[str, str]:
        return {ADDRESS: self.address, JOB_NAME: self.job_name, MODE: self.mode, WORKERS: str(self.workers)}


def skip_per_worker(batches_read: int, workers: int) -> int:
    """What each data worker skips of its stream so that a resumed attempt goes on after the `batches_read` the job
    had read in all (pure). In `distributed_epoch` mode every worker runs the whole pipeline, its skip included, on
    the pieces of the source the dispatcher deals it: W workers skipping n batches each skip W x n together (with 2
    workers a resume left 21% of a pass unread, benchmarks/data_service_resume.py), so each skips its share."""
    return batches_read // max(1, workers)


def address(host: str, port: int) -> str:
    """The dispatcher's address as TensorFlow takes it: grpc://HOST:PORT."""
    return f"{PROTOCOL}://{host}:{port}"


def job_name(job_id: str, attempt: int, body_pid: int) -> str:
    """The ranks' shared job name: one per attempt (a resumed attempt's dataset skips what was read, so it is
    another dataset to the service, and a job of the same name would refuse it)."""
    return f"hpc-train-{job_id}-attempt{attempt}-{body_pid}"
