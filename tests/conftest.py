from __future__ import annotations

import faulthandler
import gc
import importlib.util
import os
import sys
import tempfile
import time
from collections.abc import Iterator

import pytest

from tests.clustergroups import OWN, SECOND, SESSION, THIRD, cluster_group, on_a_local_cluster, worker_group
from tests.fake_slurm import without_slurm
from tests.tracking.server import mlflow_server  # noqa: F401 - the session's MLflow server, for every test folder
from tests.sshd import SshServer

# pytest's assertion rewriting of the ~290 test modules cost each xdist worker 4.5 s of CPU at every collection:
# PYTHONDONTWRITEBYTECODE (set on the machines here) kept pytest from caching the rewritten modules, as it does with
# bytecode (in __pycache__, ignored by git). The pytest processes cache them; what they start keeps the variable.
sys.dont_write_bytecode = False

# A bare `pytest` from another Python (a system one) would meet the first missing module in every test file:
# say once what to run instead.
NEEDED = ("hostlist", "yaml", "submitit", "hypothesis", "tensorflow", "tf_keras")


def pytest_configure(config: pytest.Config) -> None:
    missing = [name for name in NEEDED if importlib.util.find_spec(name) is None]
    if missing:
        pytest.exit(f"{sys.executable} cannot import {', '.join(missing)}: run the tests with env/test.sh (it sets "
                    "up .venv with every dependency), or .venv/bin/python -m pytest once .venv exists", returncode=2)
    from hypothesis import HealthCheck, settings

    # submitit configures logging on its first import (logging.config.dictConfig), which closes every handler
    # there is then: once TensorFlow is imported, absl's, and with it the stream absl took, a test's captured
    # stderr. A test that submits (a dry run) after one that imported TensorFlow in the same worker then closed
    # pytest's capture ("I/O operation on closed file"). Imported here, it configures before anything else is.
    import submitit.core.logger  # noqa: F401

    # CI runs a fixed set of examples, so a red run can be replayed; locally they vary.
    settings.register_profile("ci", derandomize=True, deadline=None, max_examples=200,
                              suppress_health_check=[HealthCheck.too_slow])
    settings.register_profile("dev", deadline=None, max_examples=100)
    settings.load_profile("ci" if os.environ.get("CI") else "dev")


# Modules whose module fixture is costly and the same for all their tests: run in one worker, it is made once
# (test_wheel.py builds a wheel and a venv).
ONE_WORKER_MODULES = ("tests/test_wheel.py",)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """xdist's scheduling by scope, one scope for each group of cluster tests and one for each other test.
    (Its own --dist loadgroup would do, but its xdist_group marks are not seen under pytest 9.)"""
    from xdist.scheduler import LoadScopeScheduling

    class LocalClusterTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::")[0]
            return worker_group(nodeid, self.numnodes) or (module if module in ONE_WORKER_MODULES else nodeid)

    return LocalClusterTogether(config, log)


# The local clusters' folders (/tmp/hpc-train-slurm-tests*) and node names are the machine's, not a suite's: two
# suites side by side (two checkouts, CI beside a developer) would cancel each other's jobs and stop each other's
# clusters. The process that runs a group's first test holds the group's lock until it exits (a group runs in one
# worker, in order), so a second suite's tests of that group wait for the first's to end.
LOCAL_CLUSTER_LOCKS = {SESSION: "/tmp/hpc-train-local-cluster-tests.lock",
                       SECOND: "/tmp/hpc-train-second-cluster-tests.lock",
                       THIRD: "/tmp/hpc-train-third-cluster-tests.lock", OWN: "/tmp/hpc-train-own-cluster-tests.lock"}
_held: dict[str, object] = {}
_frozen: list[bool] = []  # [True] once this worker froze what its TensorFlow tests left (pytest_runtest_setup)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if os.environ.get("HPC_TRAIN_TEST_TIMELINE"):  # where the suite's time goes (tests/timeline.py)
        from tests.timeline import record

        record(os.environ["HPC_TRAIN_TEST_TIMELINE"], report)


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("quick") is not None and "tensorflow" in sys.modules and not _frozen:
        # A worker's first quick test: under xdist its TensorFlow tests are over (handed out before the quick ones).
        # What they left for the collector stays uncollected: a tf.data iterator among it, torn down by a full
        # collection in some later test, waited 35-60 s for its pipeline's threads, with the machine idle (py-spy:
        # EagerTensor_dealloc -> ~IteratorResource -> ~LogicalThreadWrapper), the suite's stall near its end in
        # about every run (docs/development.md). Frozen, the collector never walks them again. A flag says it is
        # done, not gc.get_freeze_count(): Python 3.11 counts the frozen objects one by one (40 ms a call), and
        # TensorFlow's modules are frozen already where bootstrap/tfimport.py imported them.
        gc.freeze()
        _frozen.append(True)
    group = cluster_group(item.nodeid)
    if group is None or group in _held:
        return
    import fcntl

    path = LOCAL_CLUSTER_LOCKS[group]
    lock = open(path, "a")  # noqa: SIM115 - held until this process exits
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print(f"\nwaiting for another test run's tests on {group} to end ({path})", file=sys.stderr)
        fcntl.flock(lock, fcntl.LOCK_EX)
    _held[group] = lock


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`-m quick`: every test that neither starts TensorFlow nor submits jobs to the local cluster. A mock twin
    (the same behaviour as an end-to-end test, on hpc-train's mock launch instead of Slurm) runs only where the
    real local cluster cannot: the behaviour is tested once, on the real thing when there is one."""
    from tests.e2e.jobs import local_cluster_possible

    real_cluster = local_cluster_possible()
    def slow(item: pytest.Item) -> bool:
        return any(item.get_closest_marker(slow) for slow in ("tensorflow", "slurm_cluster", "mlflow"))

    if os.environ.get("PYTEST_XDIST_WORKER"):
        # The local cluster's tests are the longest share of one worker: started first, they end with the rest. The
        # other slow ones next (xdist hands out the tests in this order), so that the many quick ones come last and
        # even out the workers' ends, instead of TensorFlow's runs all at once at the end (issue 46).
        items.sort(key=lambda item: (not on_a_local_cluster(item.nodeid), not slow(item)))
    for item in items:
        if not slow(item):
            item.add_marker(pytest.mark.quick)
        twin = item.get_closest_marker("mock_twin")
        if twin is not None and real_cluster:
            item.add_marker(pytest.mark.skip(reason=f"tested on the real local Slurm by {twin.args[0]}"))


# A quick test takes 14 s at most (the data service's servers, started for real). In about every full run one quick
# test at random took 35-60 s near the suite's end: a leftover tf.data iterator torn down by the collector (found
# with this probe and py-spy; frozen away in pytest_runtest_setup, docs/development.md). The probe stays, to name
# the next such stall where it happens.
STALL_SECONDS = 25.0
GC_SPENT = {0: 0.0, 1: 0.0, 2: 0.0}  # seconds of wall in the collector, by generation, since the worker started
_gc_started: list[float] = []


def _time_the_collector(phase: str, info: dict[str, int]) -> None:
    # Wall, not CPU: a finalizer the collector runs may wait (the stall found was one, in a futex, using no CPU).
    if phase == "start":
        _gc_started[:] = [time.perf_counter()]
    elif _gc_started:
        GC_SPENT[info["generation"]] += time.perf_counter() - _gc_started[0]


gc.callbacks.append(_time_the_collector)


@pytest.fixture(autouse=True)
def a_stalled_quick_test_says_where(request: pytest.FixtureRequest) -> Iterator[None]:
    """A quick test still running after STALL_SECONDS warns, in the run's warnings summary (CI's log too), with
    every thread's stack as it was then (faulthandler's, from a thread of its own that needs no lock of Python's):
    what holds the process, a finalizer or another thread, named where it happens."""
    if request.node.get_closest_marker("quick") is None:
        yield
        return
    import resource

    wall, cpu, gc_before = time.monotonic(), time.process_time(), dict(GC_SPENT)
    switches = resource.getrusage(resource.RUSAGE_SELF).ru_nivcsw
    with tempfile.TemporaryFile("w+") as dump:
        faulthandler.dump_traceback_later(STALL_SECONDS, file=dump)
        try:
            yield
        finally:
            faulthandler.cancel_dump_traceback_later()
        dump.seek(0)
        stacks = dump.read()
    if stacks:
        # Busy or held: the worker's own CPU seconds against the wall's, the collector's wall (its finalizers
        # included), how often the kernel took the CPU from it; then what makes Python slow: a tracer left set.
        usage = resource.getrusage(resource.RUSAGE_SELF)
        collected = {generation: round(GC_SPENT[generation] - gc_before[generation], 2) for generation in GC_SPENT}
        state = (f"{time.monotonic() - wall:.1f} s of wall, {time.process_time() - cpu:.1f} s of the worker's CPU, "
                 f"{collected} s in the collector by generation, {usage.ru_nivcsw - switches} involuntary "
                 f"switches; trace {sys.gettrace()!r}, profile {sys.getprofile()!r}, gc counts {gc.get_count()}, "
                 f"{len(gc.get_objects())} objects tracked and {gc.get_freeze_count()} frozen, "
                 f"peak RSS {usage.ru_maxrss} KiB")
        request.node.warn(pytest.PytestWarning(f"still running after {STALL_SECONDS:.0f} s ({state}); its threads "
                                               f"then:\n{stacks}"))


@pytest.fixture
def clean_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    """os.environ without any Slurm, CUDA or TF_CONFIG variable of the machine running the tests."""
    for name in set(os.environ) - set(without_slurm()):
        monkeypatch.delenv(name)


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    """A real OpenSSH sshd on 127.0.0.1 (key login, pinned host key) for the remotes' tests, once a session."""
    from tests.sshd import sshd_possible, start, stop

    if not sshd_possible():
        pytest.skip("needs root, OpenSSH's sshd, ssh and rsync (env/test.sh installs them)")
    process, server = start(tmp_path_factory.mktemp("sshd"))
    yield server
    stop(process, server)
