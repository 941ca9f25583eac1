"""Write a standalone sbatch script for a training job, for people who prefer plain sbatch.

    hpc-train render --nodes 4 --gpus-per-node 2 --config job.yaml -o job.sbatch
    hpc-train render --nodes 2 -o job.sbatch -- python train.py    # your own script on every task
    hpc-train render --nodes 2 --sweep learning_rate=0.01,0.001 --sweep seed=1,2 --max-parallel 2 -o sweep.sbatch
    hpc-train render --strategy parameter_server --nodes 2 --gpus-per-node 2 --partition gpu --ps-partition cpu \
        -o ps.sbatch                              # chief and ps on CPU nodes: one heterogeneous job
    sbatch job.sbatch

The request is checked first (impossible ones are refused). Every value reaches
the script quoted; the training settings are embedded, so the script needs
nothing else but an installed hpc-train.
"""

from __future__ import annotations

import argparse
import sys

from hpc_train.cli.joboptions import add_job_arguments, job_plan, job_request, sweep_request



def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_job_arguments(parser)
    parser.add_argument("--output", "-o", default=None, metavar="FILE", help="write here instead of stdout")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    spec, train, home = job_request(args)
    sweep = sweep_request(args, train, spec)
    _warn_of_image(spec)
    plan = job_plan(args, spec, train, home, sweep)  # the plan submit --dry-run prints too, byte for byte
    script = plan.script()
    if sweep is not None:
        from hpc_train.spec.sweep import table

        index = "JOBID_INDEX" if plan.kind == "pack" else "ARRAYID_INDEX"
        print(f"hpc-train render: {plan.heading()} (runs/{spec.name}-{index}/):", file=sys.stderr)
        print("\n".join(f"  {row}" for row in table(sweep)), file=sys.stderr)
    if args.output is None:
        sys.stdout.write(script)
    else:
        Path(args.output).write_text(script)
        print(f"hpc-train render: wrote {args.output}; submit it with: sbatch {args.output}", file=sys.stderr)
    return 0


def _warn_of_image(spec) -> None:  # (JobRequest)
    """An image that is not here: what submit refuses, a warning here (a rendered script may be submitted on
    another machine, where the image is); the script is still written."""
    import os

    from hpc_train.container.runtime import image_problem
    from hpc_train.login.script import job_image

    container = job_image(spec)
    problem = container and image_problem(container, os.path.exists(container.image))
    if problem:
        print(f"hpc-train render: warning: {problem} (submit refuses it here; the script is written for where the "
              "image is)", file=sys.stderr)
