"""`--data-workers auto`'s thread in the job body (injob/servicesizer.py): each epoch of the ranks' measures decided
on once, a worker added through the body's `add`, one that does not start settling the size, the sizing kept."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from hpc_train.data_service.autosize import Sizing
from hpc_train.injob.servicesizer import ServiceSizer
from hpc_train.runs.goodput import ranks_path
from hpc_train.runs.servicerecord import read_service
from hpc_train.runs.state import write_json_atomically


def test_a_worker_that_does_not_start_settles_the_size_that_runs(tmp_path: Path) -> None:
    lines: list[str] = []
    asked: list[int] = []
    sizer = ServiceSizer(tmp_path, 1, Sizing(1, 8), lambda index: asked.append(index) is not None, lines.append)
    assert sizer.step(0.4) is None  # added, but it never listened: no epoch waits for its measure
    assert asked == [1] and lines == ["data workers 1 -> 2: input 40% of the last epoch"]
    assert sizer.sizing == Sizing(1, 8, None, "worker 2 did not start")
    assert read_service(tmp_path)["auto"] == {"workers": 1, "limit": 8, "before": None,
                                              "settled": "worker 2 did not start", "before_seconds": None}
    assert sizer.step(0.9) is None and asked == [1] and len(lines) == 1  # settled: nothing more


def test_each_epoch_is_decided_on_once_and_only_those_that_began_with_the_new_worker(tmp_path: Path) -> None:
    """Epoch 1 (34%) adds worker 2; epoch 2 began before it listened and is not its measure; epoch 3 (33%) is,
    and says it did not help. The thread reads the ranks' measures as the chief's callback writes them."""
    lines: list[str] = []
    listened = threading.Event()
    began_before = time.time()

    def add(index: int) -> bool:
        listened.set()
        return True

    sizer = ServiceSizer(tmp_path, 2, Sizing(1, 8), add, lines.append, poll=0.02).start()
    try:
        now = time.time()
        epochs = [{"epoch": 1, "input_share": 0.34, "began": now, "ended": now + 0.01}]
        write_json_atomically(ranks_path(tmp_path, 2), {"epochs": epochs})
        assert listened.wait(30)
        deadline = time.monotonic() + 30
        while read_service(tmp_path)["auto"]["workers"] != 2 and time.monotonic() < deadline:
            time.sleep(0.02)  # (the sizing is kept once the worker listens)
        epochs.append({"epoch": 2, "input_share": 0.05, "began": began_before, "ended": time.time()})
        write_json_atomically(ranks_path(tmp_path, 2), {"epochs": epochs})
        now = time.time()
        epochs.append({"epoch": 3, "input_share": 0.33, "began": now, "ended": now + 0.01})
        write_json_atomically(ranks_path(tmp_path, 2), {"epochs": epochs})
        while read_service(tmp_path)["auto"]["settled"] is None and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        sizer.stop()
    assert lines == ["data workers 1 -> 2: input 34% of the last epoch",
                     "data workers stay at 2: input 33% of the last epoch (34% before worker 2): worker 2 took it down "
                     "by under 3 points"]
