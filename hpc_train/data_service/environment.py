"""What the job body tells every rank of its data service, in the environment (pure).

- `HPC_TRAIN_DATA_SERVICE`: the dispatcher's address, `grpc://HOST:PORT` (a user's command reads it too);
- `HPC_TRAIN_DATA_SERVICE_JOB`: the service's job name, the same in every rank of an attempt, so that the ranks
  share one stream of elements instead of each reading the whole dataset;
- `HPC_TRAIN_DATA_SERVICE_MODE`: TensorFlow's processing mode, `distributed_epoch`: each element of the dataset is
  produced by one data worker and read by one rank, in the order the workers finish it (not the dataset's order).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

ADDRESS = "HPC_TRAIN_DATA_SERVICE"
JOB_NAME = "HPC_TRAIN_DATA_SERVICE_JOB"
MODE = "HPC_TRAIN_DATA_SERVICE_MODE"
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

    @classmethod
    def from_environ(cls, env: Mapping[str, str]) -> ServiceEnv | None:
        """The job's data service, None when the job has none (HPC_TRAIN_DATA_SERVICE unset or empty)."""
        address = env.get(ADDRESS, "").strip()
        if not address:
            return None
        return cls(address, env.get(JOB_NAME, "").strip() or "hpc-train", env.get(MODE, "").strip() or DISTRIBUTED_EPOCH)

    def environ(self) -> dict[str, str]:
        return {ADDRESS: self.address, JOB_NAME: self.job_name, MODE: self.mode}


def address(host: str, port: int) -> str:
    """The dispatcher's address as TensorFlow takes it: grpc://HOST:PORT."""
    return f"{PROTOCOL}://{host}:{port}"


def job_name(job_id: str, attempt: int, body_pid: int) -> str:
    """The ranks' shared job name: one per attempt (a resumed attempt's dataset skips what was read, so it is
    another dataset to the service, and a job of the same name would refuse it)."""
    return f"hpc-train-{job_id}-attempt{attempt}-{body_pid}"
