"""`python -m hpc_train.train [--config FILE] [--set key=value ...]`: the shared trainer."""

import sys

from hpc_train.training.trainer import main

if __name__ == "__main__":
    sys.exit(main())
