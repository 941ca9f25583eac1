"""The data service's own component of a heterogeneous job (`--data-partition P`), as the job body sees it (pure).

Such a job's last component holds the dispatcher and the data workers (spec/directives.py:data_component); the
ranks' components come before it. Slurm 22.05's batch shell names it like any other (checked on `hpc-train cluster
up`: SLURM_HET_SIZE counts it, SLURM_JOB_NODELIST_HET_GROUP_N and SLURM_NTASKS_HET_GROUP_N say its nodes and tasks;
the plain SLURM_JOB_NODELIST, SLURM_NTASKS are component 0's; a plain srun runs component 0's). So the body reads
its attempt through `ranks_view`: the job as its ranks' components alone make it (the step, the start line, the
ports, the ledger, the retries count what they did before), with the service's component kept aside in two
variables of its own, which injob/dataservice.py starts the service on (srun --het-group=N). srun itself is given
the job's SLURM_HET_SIZE (`srun_environ`).
"""

from __future__ import annotations

from collections.abc import Mapping

from hpc_train.bootstrap.nodelist import expand_nodelist
from hpc_train.spec.data_service import DataService

COMPONENT = "HPC_TRAIN_DATA_COMPONENT"  # the service's component, its index in the job (the last)
NODES = "HPC_TRAIN_DATA_NODES"  # its nodes, as Slurm's node list names them
HET_SIZE = "SLURM_HET_SIZE"


def ranks_view(env: Mapping[str, str], service: DataService | None) -> dict[str, str]:
    """The batch shell's variables as the ranks' components alone make the job: the service's component (the last)
    taken out of SLURM_HET_SIZE and its _HET_GROUP_N (and old _PACK_GROUP_N) variables, and named in COMPONENT and
    NODES instead; a job left of one component a plain job (no SLURM_HET_SIZE). `env` as it is for a job without
    such a component, or one run without its hetjob block (bash job.sbatch, a hand-edited script)."""
    size = env.get(HET_SIZE, "")
    if service is None or not service.component or not size.isdigit() or int(size) < 2 or COMPONENT in env:
        return dict(env)
    last = int(size) - 1
    own = (f"_HET_GROUP_{last}", f"_PACK_GROUP_{last}")
    view = {name: value for name, value in env.items() if not name.endswith(own)}
    view.update({COMPONENT: str(last), NODES: env.get(f"SLURM_JOB_NODELIST_HET_GROUP_{last}", "")})
    if last > 1:
        view[HET_SIZE] = str(last)
    else:  # (component 0's plain variables are the job's: a job of one component)
        view.pop(HET_SIZE, None)
        view.pop("SLURM_PACK_SIZE", None)
    return view


def srun_environ(env: Mapping[str, str]) -> dict[str, str]:
    """A view's variables as srun is given them: SLURM_HET_SIZE the job's own again (its components, the service's
    included). srun in a heterogeneous allocation without it starts nothing ("No directives to start application on
    any available hetjob components", Slurm 22.05, a plain srun for component 0); the ranks it starts still find
    their own components alone, the service's _HET_GROUP_N variables being gone (bootstrap/hetstep.py)."""
    index = component_of(env)
    return dict(env) if index is None else {**env, HET_SIZE: str(index + 1)}


def component_of(env: Mapping[str, str]) -> int | None:
    """The service's component in a view of ranks_view's; None: the service runs beside the ranks."""
    index = env.get(COMPONENT, "")
    return int(index) if index.isdigit() else None


def service_nodes(env: Mapping[str, str]) -> tuple[str, ...]:
    """The nodes of the service's component (its first: the dispatcher's); () without one."""
    nodes = env.get(NODES, "").strip()
    return expand_nodelist(NODES, nodes) if nodes else ()


def het_group(env: Mapping[str, str]) -> list[str]:
    """srun's option that puts a step of the service on its component; [] beside the ranks."""
    index = component_of(env)
    return [] if index is None else [f"--het-group={index}"]
