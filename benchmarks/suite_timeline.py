"""The suite's timeline: one lane per pytest-xdist worker, a bar per test, coloured by what it is (a local
cluster's group, the TensorFlow runs outside the clusters, the rest), from what tests/timeline.py recorded.

    HPC_TRAIN_TEST_TIMELINE=/tmp/timeline env/test.sh
    python benchmarks/suite_timeline.py /tmp/timeline [suite-timeline.png]

Prints each worker's busy seconds and end, each group's seconds, and the tests running in the last minute.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.clustergroups import cluster_group  # noqa: E402

TENSORFLOW_OUTSIDE = ("tests/training/", "tests/examples/", "tests/tracking/", "tests/bench/", "tests/test_wheel.py")


def kind(test: str) -> str:
    group = cluster_group(test)
    if group is not None:
        return group
    return "TensorFlow and servers, outside the clusters" if test.startswith(TENSORFLOW_OUTSIDE) else "the rest"


def tests(folder: Path) -> list[dict]:
    """One entry per test: its worker, first start, last stop."""
    spans: dict[tuple[str, str], dict] = {}
    for path in sorted(folder.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            phase = json.loads(line)
            key = (phase["worker"], phase["test"])
            span = spans.setdefault(key, {"worker": phase["worker"], "test": phase["test"], "start": phase["start"],
                                          "stop": phase["stop"]})
            span["start"], span["stop"] = min(span["start"], phase["start"]), max(span["stop"], phase["stop"])
    return sorted(spans.values(), key=lambda span: span["start"])


def main(argv: list[str]) -> int:
    folder = Path(argv[0])
    output = Path(argv[1]) if len(argv) > 1 else folder / "suite-timeline.png"
    spans = tests(folder)
    begin, end = min(span["start"] for span in spans), max(span["stop"] for span in spans)
    busy, last, by_kind = defaultdict(float), defaultdict(float), defaultdict(float)
    for span in spans:
        busy[span["worker"]] += span["stop"] - span["start"]
        last[span["worker"]] = max(last[span["worker"]], span["stop"] - begin)
        by_kind[kind(span["test"])] += span["stop"] - span["start"]
    print(f"{len(spans)} tests, {end - begin:.0f} s from the first start to the last stop")
    for worker in sorted(busy):
        print(f"  {worker}: busy {busy[worker]:.0f} s, ends at {last[worker]:.0f} s")
    for name, seconds in sorted(by_kind.items(), key=lambda item: -item[1]):
        print(f"  {name}: {seconds:.0f} s of test time")
    print("running in the last minute:")
    for span in spans:
        if span["stop"] > end - 60 and span["stop"] - span["start"] > 5:
            print(f"  {span['worker']} {span['start'] - begin:6.0f}-{span['stop'] - begin:.0f} s {span['test']}")
    draw(spans, begin, output)
    print(f"drawn: {output}")
    return 0


def draw(spans: list[dict], begin: float, output: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    workers = sorted({span["worker"] for span in spans})
    kinds = sorted({kind(span["test"]) for span in spans})
    colours = dict(zip(kinds, plt.get_cmap("tab10").colors))
    figure, axes = plt.subplots(figsize=(14, 1.5 + 0.6 * len(workers)))
    for span in spans:
        lane = workers.index(span["worker"])
        axes.barh(lane, (span["stop"] - span["start"]) / 60, left=(span["start"] - begin) / 60, height=0.8,
                  color=colours[kind(span["test"])], edgecolor="white", linewidth=0.2)
    axes.set_yticks(range(len(workers)), workers)
    axes.set_xlabel("minutes from the first test's start")
    axes.legend(handles=[plt.Rectangle((0, 0), 1, 1, color=colours[name]) for name in kinds], labels=kinds,
                loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
    axes.set_title("the test suite, worker by worker")
    figure.tight_layout()
    figure.savefig(output, dpi=120)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
