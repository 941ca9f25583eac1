"""Bootstrap: turn the Slurm step a rank runs in into TF_CONFIG and a device binding.

    >>> from hpc_train.bootstrap import apply_to_environ, BootstrapOptions
    >>> layout = apply_to_environ(options=BootstrapOptions(strategy="parameter_server"))

`compute_layout` is the pure core (environment mapping in, frozen `Layout` out);
`apply_to_environ` exports the result; `startup.start_rank` is what every rank
does first (place itself, say where, check its port and its GPUs), `stderr_filter` its log's filter of
TensorFlow's start-up noise (a rank's and a supervised command's alike); `hpc_train.bootstrap.resolver`
offers a TensorFlow ClusterResolver built from a layout (it imports TensorFlow).

A "rank" is one Slurm process of the step (SLURM_PROCID); TensorFlow calls it a
task. `Task`, `describe_task` and `task_environment` are the old names of
`Rank`, `describe_rank` and `rank_environment`, kept for scripts that use them.
"""

from hpc_train.bootstrap.environ import apply_to_environ, describe_rank, format_table, rank_environment, tf_config
from hpc_train.bootstrap.layout import BootstrapOptions, Layout, Rank, compute_layout
from hpc_train.bootstrap.roles import Strategy

Task = Rank
describe_task = describe_rank
task_environment = rank_environment

__all__ = [
    "BootstrapOptions",
    "Layout",
    "Rank",
    "Strategy",
    "Task",
    "apply_to_environ",
    "compute_layout",
    "describe_rank",
    "describe_task",
    "format_table",
    "rank_environment",
    "task_environment",
    "tf_config",
]
