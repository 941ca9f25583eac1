"""Write a starter project to edit: a task module, its training settings and an sbatch script.

    hpc-train init myproject
    cd myproject && hpc-train train --config config.yaml --set strategy=none

DIR gets task.py (build_model, train_dataset, validation_dataset on generated
data: replace them with yours), config.yaml (task: task.py, strategy, epochs...),
job.sbatch (2 nodes, rendered as hpc-train render would) and README.md. Files
already there are never overwritten unless --force.
"""

from __future__ import annotations

import argparse

FILES = ("task.py", "config.yaml", "job.sbatch", "README.md")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory", metavar="DIR", help="where the project goes (created if missing)")
    parser.add_argument("--force", action="store_true", help="overwrite files that are already there")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from hpc_train.cli.joboptions import default_home
    from hpc_train.config import load_config
    from hpc_train.errors import HpcTrainError
    from hpc_train.login.script import render_script
    from hpc_train.spec.request import JobRequest, project_name
    from hpc_train.resources import resource

    folder = Path(args.directory)
    there = [name for name in FILES if (folder / name).exists()]
    if there and not args.force:
        raise HpcTrainError(f"{folder / there[0]} is already there; choose another DIR, or pass --force to overwrite "
                            f"{', '.join(there)}")
    # The job is named after the folder, as submit and render name a job run from it.
    spec = JobRequest.one_group(nodes=2, name=project_name(folder.resolve(), "starter"))  # checked before any file
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("task.py", "config.yaml"):
        (folder / name).write_text(resource(f"templates/starter/{name}").read_text())
    config = load_config(folder / "config.yaml")  # checks it, and finds task.py from the file's folder
    (folder / "job.sbatch").write_text(render_script(spec, config, home=default_home()))
    (folder / "README.md").write_text(README)
    print(f"hpc-train init: wrote {', '.join(str(folder / name) for name in FILES)}")
    print(f"next: cd {folder} && hpc-train train --config config.yaml --set strategy=none   # try it here\n"
          f"      sbatch job.sbatch    # or: hpc-train submit --nodes 2 --config config.yaml")
    return 0


README = """# Your hpc-train project

- `task.py`: your model and data (edit `build_model`, `train_dataset`, `validation_dataset`).
- `config.yaml`: the training settings (`hpc-train train --keys` lists them).
- `job.sbatch`: 2 nodes, MultiWorkerMirrored; edit its `#SBATCH` lines (partition, account, GPUs, time), or make
  another with `hpc-train render --nodes N --config config.yaml -o job.sbatch`.

Try it here: `hpc-train train --config config.yaml --set strategy=none`.
On Slurm: `sbatch job.sbatch`, or `hpc-train submit --nodes 2 --config config.yaml`; then `hpc-train status`.
"""
