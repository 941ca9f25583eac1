"""`python -m hpc_train.train [--config FILE] [--set key=value ...]`: the same as `hpc-train train`."""

import sys

from hpc_train.cli import main

if __name__ == "__main__":
    sys.exit(main(["train", *sys.argv[1:]]))
