"""What every rank does first, whatever it then runs (the trainer, a user's command, doctor's step):
place itself from the Slurm step, say where it is, and check that its port is free and that the GPUs it is bound
to are on its node (per nvidia-smi, before TensorFlow starts).

One function, so that the rank line (`rank R is ROLE I at HOST:PORT, GPUs: G`),
the notes and the port check read the same in every log.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from hpc_train.bootstrap.devices import NVIDIA_DRIVER, cpu_fallback_note, unknown_gpu_note
from hpc_train.bootstrap.environ import describe_rank, rank_environment
from hpc_train.bootstrap.layout import BootstrapOptions, Layout, compute_layout
from hpc_train.bootstrap.nvidia import list_gpus
from hpc_train.bootstrap.portcheck import ensure_port_free

PREFIX = "hpc-train bootstrap"


def say_notes(layout: Layout) -> None:
    """The layout's notes (a guessed placement, GPUs left as Slurm set them ...), one line each on stderr."""
    for note in layout.notes:
        print(f"{PREFIX}: note: {note}", file=sys.stderr)


def start_rank(options: BootstrapOptions, environ: Mapping[str, str],
               more: str = "") -> tuple[Layout, dict[str, str]]:
    """This rank's layout and the variables it exports (TF_CONFIG, its GPUs); its notes and its line said on
    stderr (`more` appended to it), its port checked free (one line naming the fix, rather than a hang in
    TensorFlow)."""
    layout = compute_layout(environ, options)
    say_notes(layout)
    ensure_port_free(layout.me.port, layout.me.host)
    print(f"{PREFIX}: {describe_rank(layout, environ.get('CUDA_VISIBLE_DEVICES'))}{', ' + more if more else ''}",
          file=sys.stderr, flush=True)
    variables = rank_environment(layout)
    if note := missing_gpu_note(layout.rank, variables.get("CUDA_VISIBLE_DEVICES",
                                                           environ.get("CUDA_VISIBLE_DEVICES"))):
        print(f"{PREFIX}: warning: {note}", file=sys.stderr, flush=True)
    return layout, variables


def missing_gpu_note(rank: int, bound: str | None) -> str | None:
    """Before TensorFlow starts: the line for a rank bound to a GPU that nvidia-smi does not list on this node
    (TensorFlow would just not see it). No check without a GPU bound, or where nvidia-smi is missing or fails."""
    if not bound:
        return None
    listed = list_gpus().gpus
    return None if listed is None else unknown_gpu_note(rank, bound, listed)


def gpu_driver_note(variables: Mapping[str, str]) -> str | None:
    """Before TensorFlow starts: the line for GPUs Slurm bound on a node without NVIDIA's driver (they go unused)."""
    return None if os.path.exists(NVIDIA_DRIVER) else cpu_fallback_note(variables.get("CUDA_VISIBLE_DEVICES"), None)
