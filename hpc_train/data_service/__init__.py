"""TensorFlow's data service for a job (docs/data_service.md): the input pipeline run by a dispatcher and data
workers that the job body starts beside the ranks, read by every rank through `distribute`.

`environment` says what the body tells the ranks (pure: the variables, the job name, the mode), `endpoints`
where the service listens (pure: the top of the job's port window), `servers` is the dispatcher's and a worker's
process (`python -m hpc_train.data_service.servers`), `client` the one-line helper a rank's dataset goes through:

    from hpc_train.data_service import distribute
    dataset = distribute(dataset)   # through the job's data service when it has one, else as it was

Nothing here imports TensorFlow until a dataset or a server asks for it.
"""

from __future__ import annotations

from hpc_train.data_service.client import distribute

__all__ = ["distribute"]
