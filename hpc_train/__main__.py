"""`python -m hpc_train` is the same as the `hpc-train` command; in an image (a rank a container runs, its runtime
in HPC_TRAIN_CONTAINER), the job's site-packages are added and the image's TensorFlow checked first."""

import os
import sys

if os.environ.get("HPC_TRAIN_CONTAINER"):
    from hpc_train.container.inside import enter

    if problem := enter(os.environ):  # one line; noted as a refusal, which the epilogue does not retry
        from hpc_train.exitcodes import EXIT_REFUSED
        from hpc_train.runs.attempts import note_failure

        print(problem, file=sys.stderr, flush=True)
        if os.environ.get("HPC_TRAIN_RUN_DIR"):
            note_failure(os.environ["HPC_TRAIN_RUN_DIR"], "refused", problem)
        sys.exit(EXIT_REFUSED)

from hpc_train.cli import main  # noqa: E402 - after the image's check: nothing of it may run before

sys.exit(main())
