"""Bootstrap: turn the Slurm step a task runs in into TF_CONFIG and a device binding.

    >>> from hpc_train.bootstrap import apply_to_environ, BootstrapOptions
    >>> layout = apply_to_environ(options=BootstrapOptions(strategy="parameter_server"))

`compute_layout` is the pure core (environment mapping in, frozen `Layout` out);
`apply_to_environ` exports the result; `hpc_train.bootstrap.resolver` offers a
TensorFlow ClusterResolver built from a layout (it imports TensorFlow).
"""

from hpc_train.bootstrap.environ import apply_to_environ, describe_task, format_table, task_environment, tf_config
from hpc_train.bootstrap.layout import BootstrapOptions, Layout, Task, compute_layout
from hpc_train.bootstrap.roles import Strategy

__all__ = [
    "BootstrapOptions",
    "Layout",
    "Strategy",
    "Task",
    "apply_to_environ",
    "describe_task",
    "compute_layout",
    "format_table",
    "task_environment",
    "tf_config",
]
