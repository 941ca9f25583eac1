"""Idle GPUs and the status line from samples (pure): thresholds, a busy sample clearing, the line's form."""

from __future__ import annotations

from typing import Any

from hpc_train.utilization.idle import current, idle_line, idle_lines, span, states_of, summary_line


def row(t: float, node: str, utilizations: dict[str, float], below: float = 5.0, after: float = 300.0,
        every: float = 10.0) -> dict[str, Any]:
    return {"t": t, "node": node, "every": every, "idle_below": below, "idle_after": after,
            "gpus": [{"gpu": gpu, "ranks": [int(gpu) + 10], "util": value, "mem": 1, "mem_total": 2}
                     for gpu, value in utilizations.items()], "ranks": []}


def series(node: str, gpu_values: list[dict[str, float]], every: float = 10.0, **settings: float) -> list[dict]:
    return [row(index * every, node, values, every=every, **settings) for index, values in enumerate(gpu_values)]


def test_a_gpu_is_named_once_under_the_threshold_for_the_time_and_not_before() -> None:
    rows = series("node2", [{"1": 90.0}] + [{"1": 2.0}] * 31)  # idle from t=10 to t=310
    assert not states_of(rows[:31])[("node2", "1")].idle  # 290 s
    state = states_of(rows)[("node2", "1")]
    assert state.idle and state.idle_since == 10.0 and state.idle_seconds == 300.0


def test_a_busy_sample_clears_it_and_the_next_idle_counts_from_anew() -> None:
    rows = series("node2", [{"1": 0.0}] * 40 + [{"1": 60.0}] + [{"1": 0.0}] * 3)
    state = states_of(rows)[("node2", "1")]
    assert not state.idle and state.idle_since == 410.0
    assert not states_of(rows[:41])[("node2", "1")].idle and states_of(rows[:41])[("node2", "1")].idle_since is None


def test_the_thresholds_are_the_jobs_own() -> None:
    rows = series("n", [{"0": 8.0}] * 4, below=10.0, after=30.0)
    assert states_of(rows)[("n", "0")].idle
    assert not states_of(series("n", [{"0": 8.0}] * 4, after=30.0))[("n", "0")].idle  # 8% is over 5%


def test_the_status_line_counts_busy_gpus_and_names_the_idle_ones() -> None:
    busy = {str(gpu): 97.0 for gpu in range(4)}
    node1 = series("node1", [busy] * 40)
    node2 = series("node2", [{**busy, "1": 1.0, "3": 30.0}] * 40)
    line = summary_line(states_of(sorted(node1 + node2, key=lambda r: r["t"])))
    assert line == "GPUs: 6 of 8 busy over 50%; node2 GPU 1 idle for 6 min"
    assert summary_line(states_of(node1)) == "GPUs: 4 of 4 busy over 50%"
    assert summary_line({}) is None


def test_the_idle_line_names_the_node_the_gpu_and_its_ranks() -> None:
    state = states_of(series("node2", [{"1": 0.0}] * 40))[("node2", "1")]
    assert idle_line(state).startswith("node2 GPU 1 (rank 11) idle for 6 min: under 5% since ")
    assert idle_lines({("node2", "1"): state}) == [idle_line(state)]


def test_busy_is_the_mean_of_the_last_minute() -> None:
    alternating = series("n", [{"0": 100.0}, {"0": 0.0}] * 10)  # about 50%: not over it
    assert not states_of(alternating)[("n", "0")].busy
    assert states_of(series("n", [{"0": 0.0}] * 10 + [{"0": 80.0}] * 6))[("n", "0")].busy


def test_an_earlier_attempts_nodes_are_not_counted() -> None:
    early = series("node1", [{"0": 90.0}] * 3)
    later = [row(1000.0 + 10 * index, "node3", {"0": 90.0}) for index in range(3)]
    assert set(current(states_of(early + later))) == {("node3", "0")}


def test_a_gpu_no_rank_is_bound_to_is_named_as_such() -> None:
    rows = [{**sample, "gpus": [{**sample["gpus"][0], "ranks": []}]} for sample in series("n", [{"2": 0.0}] * 40)]
    assert idle_line(states_of(rows)[("n", "2")]).startswith("n GPU 2 (no rank) idle for 6 min")


def test_a_gpu_entry_this_version_did_not_write_is_skipped() -> None:
    rows = series("n", [{"0": 90.0}] * 3)
    rows[1]["gpus"].append({"gpu": "1", "util": "busy"})
    rows[2]["gpus"].append({"util": 3.0})
    assert set(states_of(rows)) == {("n", "0")}
    assert states_of([{**rows[0], "idle_below": "low"}]) == {}


def test_spans_read_in_minutes_from_one_minute() -> None:
    assert (span(40), span(60), span(359)) == ("40 s", "1 min", "6 min")
