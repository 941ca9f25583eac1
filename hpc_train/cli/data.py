"""Stage MNIST for compute nodes without internet.

    hpc-train data fetch                  # into Keras' cache (~/.keras/datasets), found by default
    hpc-train data fetch --dest DIR       # then: hpc-train train --data-dir DIR
"""

from __future__ import annotations

import argparse



def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    fetch = actions.add_parser("fetch", help="download and verify mnist.npz", description=__doc__,
                               formatter_class=parser.formatter_class)
    fetch.add_argument("--dest", metavar="DIR", help="directory to put mnist.npz in (default: Keras' cache)")
    fetch.add_argument("--url", metavar="URL", help="download from this mirror instead of Keras' address")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from hpc_train.tasks.mnist.fetch import MNIST_URL, fetch_mnist
    from hpc_train.tasks.mnist.data import keras_cache_file

    destination = Path(args.dest) if args.dest else keras_cache_file().parent
    fetch_mnist(destination, args.url or MNIST_URL)
    return 0
