"""`hpc-train track sync ID`: a job's run folder uploaded to MLflow after the fact, for compute nodes that cannot
reach the tracking server at all (or a job whose server was down). Idempotent: the run tracking.json names is
found again, and only the epochs it lacks are logged."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from hpc_train.errors import HpcTrainError
from hpc_train.runs.folders import JobRecord, element_folders
from hpc_train.runs.state import read_tracking
from hpc_train.slurm.client import SlurmClient
from hpc_train.slurm.follow import job_state
from hpc_train.tracking.job import JobTracking
from hpc_train.tracking.settings import ui_hint


def sync(record: JobRecord, uri: str | None, experiment: str | None, env: Mapping[str, str],
         slurm: SlurmClient | None = None) -> list[str]:
    """Upload the job's folder (a sweep's: each element's that has started); one line per run uploaded. A run whose
    folder does not say how the job ended ends as `slurm` says (None, or a job run here: still running)."""
    folders = [folder for folder in element_folders(record) if folder.is_dir()] if record.is_sweep else \
        [Path(record.folder)]
    if not folders:
        raise HpcTrainError(f"job {record.job_id}: none of its elements has started yet; sync it when one has")
    lines = []
    for folder in folders:
        tracking = JobTracking.for_job(folder, uri, experiment, env, lambda line: None)
        try:
            status = tracking.upload(None if slurm is None or record.is_local else
                                     lambda job_id: slurm_state(job_id, slurm))
        except HpcTrainError:
            raise
        except Exception as error:  # noqa: BLE001 - MLflow's many errors: one line
            raise HpcTrainError(f"MLflow at {tracking.settings.uri}: {one_line(error)}; check --tracking-uri (or "
                                "MLFLOW_TRACKING_URI) and that the server answers, then run it again") from None
        known = read_tracking(folder)
        lines.append(f"{folder.name}: MLflow run {known.get('run_id')} in experiment {tracking.settings.experiment}, "
                     f"{known.get('last_epoch') or 0} epoch(s) logged, {status or 'still running'}; see it: "
                     f"{ui_hint(tracking.settings)}")
    return lines


def slurm_state(job_id: str, slurm: SlurmClient) -> str:
    """What Slurm says of the job's state; its failure in Slurm's name (not the tracker's), on one line."""
    try:
        return job_state(job_id, slurm)[0]
    except HpcTrainError:
        raise
    except Exception as error:  # noqa: BLE001 - an answer Slurm's commands could not give, or we could not read
        raise HpcTrainError(f"Slurm, asked how job {job_id} ended: {one_line(error)}; check that "
                            f"`scontrol show job {job_id}` answers, then run it again") from None


def one_line(error: BaseException) -> str:
    """An error's first line, for a one-line message."""
    return str(error).strip().splitlines()[0][:200] if str(error).strip() else type(error).__name__
