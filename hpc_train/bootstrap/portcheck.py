"""Fail fast when this task's port is taken, instead of a silent collision.

gRPC listens with SO_REUSEPORT, so a second job's TensorFlow server can bind a
port that another job's server already holds, and the kernel then splits
connections between the two jobs. Binding the port once ourselves, without
SO_REUSEPORT, finds any listener first.
"""

from __future__ import annotations

import errno
import socket

from hpc_train.errors import HpcTrainError


def port_is_free(port: int) -> bool:
    """Whether nothing on this machine listens on `port` right now."""
    try:
        ensure_port_free(port, "this machine")
    except HpcTrainError:
        return False
    return True


def ensure_port_free(port: int, host: str) -> None:
    """Raise `HpcTrainError` if something on this machine already listens on `port`."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # SO_REUSEADDR lets us pass a port whose last connection lingers in TIME_WAIT,
        # which TensorFlow's server could bind too.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("0.0.0.0", port))
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                raise HpcTrainError(
                    f"port {port} on {host} is already in use (another job on this node?); "
                    "pass --port-base with a free range, or start the step with srun --resv-ports") from None
            raise HpcTrainError(f"cannot listen on port {port} on {host} ({error.strerror}); "
                                "pass --port-base with a free range") from None
