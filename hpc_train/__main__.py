"""`python -m hpc_train` is the same as the `hpc-train` command."""

import sys

from hpc_train.cli import main

sys.exit(main())
