"""The packed sweep's scheduler core: shares, disjointness, the next trial as one ends, the cap, retries."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from hpc_train.injob.pack.core import (CANCELLED, DONE, FAILED, NODE_LOST, PRUNED, RUNNING, WAITING, PackState,
                                       as_json, cancel_waiting, ended, from_json, nodes_lost, on_lost_node, slots_of,
                                       starts)


def test_slots_are_the_shares_of_each_node_or_blocks_of_whole_nodes() -> None:
    one_gpu = slots_of(["node1", "node2"], 1, 2)
    assert [(slot.index, slot.nodes) for slot in one_gpu] == [(0, ("node1",)), (1, ("node1",)), (2, ("node2",)),
                                                             (3, ("node2",))]
    blocks = slots_of(["a", "b", "c", "d", "e"], 2, 1)
    assert [slot.nodes for slot in blocks] == [("a", "b"), ("c", "d")]  # e is left over: no half trial


def test_eight_trials_on_four_shares_run_four_at_once_each_on_its_own_share() -> None:
    state = PackState.new(slots_of(["node1", "node2"], 1, 2), 8, None, 0)
    state, first = starts(state, 0.0)
    assert [start.index for start in first] == [0, 1, 2, 3]
    assert sorted(start.slot.index for start in first) == [0, 1, 2, 3]  # disjoint: no share twice
    assert [trial.state for trial in state.trials] == [RUNNING] * 4 + [WAITING] * 4
    state, again = starts(state, 1.0)
    assert again == []  # no share free: nothing more starts


def test_the_next_trial_starts_on_the_share_that_one_ending_frees() -> None:
    state, _ = starts(PackState.new(slots_of(["node1", "node2"], 1, 2), 8, None, 0), 0.0)
    state = ended(state, 2, 0, 5.0)  # (on node1's second share: trials spread over the nodes, 0 and 2 on node1)
    assert state.trials[2].state == DONE and state.trials[2].runs[0]["how"] == DONE
    state, launched = starts(state, 5.0)
    assert [(start.index, start.slot.index, start.slot.nodes) for start in launched] == [(4, 1, ("node1",))]


def test_a_cap_below_the_shares_spreads_the_trials_over_every_node_the_job_holds() -> None:
    """Issue 46: --nodes 2 --gpus-per-node 4 --max-parallel 3 ran every trial on node1's GPUs 0-2 while node2
    idled; the trials now go to the node running the fewest, the batch host's first."""
    state, launched = starts(PackState.new(slots_of(["node1", "node2"], 1, 4), 8, 3, 0), 0.0)
    assert [start.slot.nodes[0] for start in launched] == ["node1", "node2", "node1"]
    assert len({start.slot.index for start in launched}) == 3
    state, launched = starts(ended(state, 1, 0, 1.0), 1.0)  # node2's one ends: the next goes there again
    assert [(start.index, start.slot.nodes) for start in launched] == [(3, ("node2",))]
    state, launched = starts(ended(state, 0, 0, 2.0), 2.0)  # node1 runs one, node2 one: node1 first
    assert [(start.index, start.slot.nodes) for start in launched] == [(4, ("node1",))]
    blocks, launched = starts(PackState.new(slots_of(["a", "b", "c", "d"], 2, 1), 3, 1, 0), 0.0)
    assert [start.slot.nodes for start in launched] == [("a", "b")]


def test_max_parallel_caps_the_trials_running_at_once() -> None:
    state, launched = starts(PackState.new(slots_of(["node1", "node2"], 1, 2), 5, 2, 0), 0.0)
    assert [start.index for start in launched] == [0, 1] and len(state.free_slots()) == 2
    state, launched = starts(ended(state, 0, 0, 1.0), 1.0)
    assert [start.index for start in launched] == [2] and len(state.running) == 2


def test_a_crash_is_retried_first_on_another_share_away_from_its_node() -> None:
    state, _ = starts(PackState.new(slots_of(["node1", "node2"], 1, 2), 6, None, 1), 0.0)  # 0,2 node1; 1,3 node2
    state = ended(state, 3, 0, 1.0)  # frees a share on node2
    state = ended(state, 0, 1, 1.0)  # crashes on node1: a share there is free too
    assert state.trials[0].state == WAITING and state.trials[0].avoid == ("node1",)
    assert state.trials[0].runs[-1]["how"] == "crashed"
    state, launched = starts(state, 1.0)
    assert (launched[0].index, launched[0].slot.nodes, launched[0].attempt) == (0, ("node2",), 2)
    assert launched[1].index == 4 and launched[1].slot.nodes == ("node1",)  # the next new trial takes the other
    state = ended(state, 0, 1, 2.0)  # its retries spent
    assert state.trials[0].state == FAILED and state.trials[0].code == 1


def test_a_crash_with_only_its_own_node_free_is_retried_there_rather_than_left_waiting() -> None:
    state, _ = starts(PackState.new(slots_of(["node1"], 1, 1), 2, None, 2), 0.0)
    state, launched = starts(ended(state, 0, 9, 1.0), 1.0)
    assert [(start.index, start.slot.nodes) for start in launched] == [(0, ("node1",))]


def test_pruned_and_cancelled_ends_are_never_retried() -> None:
    state, _ = starts(PackState.new(slots_of(["n"], 1, 2), 3, None, 3), 0.0)
    state = ended(ended(state, 0, 0, 1.0, PRUNED), 1, 143, 1.0, CANCELLED)
    state = cancel_waiting(state, 2)
    assert [trial.state for trial in state.trials] == [PRUNED, CANCELLED, CANCELLED] and state.finished


def test_a_requeued_pack_resumes_the_running_trials_first_then_the_rest() -> None:
    state, _ = starts(PackState.new(slots_of(["node1"], 1, 2), 4, None, 0), 0.0)
    state = ended(state, 0, 0, 1.0)
    saved = as_json(state)  # trial 1 still running when the job was requeued
    resumed = from_json(saved, slots_of(["node7"], 1, 2))
    assert [trial.state for trial in resumed.trials] == [DONE, WAITING, WAITING, WAITING]
    resumed, launched = starts(resumed, 10.0)
    assert [(start.index, start.attempt, start.slot.nodes) for start in launched] == [(1, 2, ("node7",)),
                                                                                      (2, 1, ("node7",))]


def test_a_trial_stopped_by_the_warning_waits_first_and_spends_no_retry() -> None:
    state, _ = starts(PackState.new(slots_of(["node1"], 1, 1), 2, None, 0), 0.0)
    state = ended(state, 0, 75, 1.0, "requeued")
    assert state.trials[0].state == WAITING and state.order == (0, 1) and state.trials[0].requeues == 1
    state, launched = starts(state, 2.0)
    assert [(start.index, start.attempt) for start in launched] == [(0, 2)]
    assert ended(state, 0, 1, 3.0).trials[0].state == FAILED  # max_retries 0: its crash now is its end


def test_a_lost_node_takes_its_trials_to_the_shares_left_and_none_starts_there_again() -> None:
    state, _ = starts(PackState.new(slots_of(["node1", "node2"], 1, 2), 5, None, 0), 0.0)  # 0,2 node1; 1,3 node2
    state = nodes_lost(state, ["node1"])
    assert on_lost_node(state, 0) and on_lost_node(state, 2) and not on_lost_node(state, 1)
    state = ended(state, 0, 143, 1.0, NODE_LOST)
    state = ended(state, 2, 143, 1.0, NODE_LOST)
    assert [state.trials[index].state for index in (0, 2)] == [WAITING, WAITING]  # no retries (0), yet not failed
    assert state.trials[0].runs[-1]["how"] == NODE_LOST and state.trials[0].losses == 1
    state, launched = starts(state, 1.0)
    assert launched == []  # node2's shares are busy, node1's are gone
    state, launched = starts(ended(state, 1, 0, 2.0), 2.0)
    assert [(start.slot.nodes, start.attempt) for start in launched] == [(("node2",), 2)]
    assert launched[0].index in (0, 2)  # one of the two lost ones, before any new trial
    state = ended(state, launched[0].index, 1, 3.0)  # a crash of its own now: its one attempt (0 retries) is spent
    assert state.trials[launched[0].index].state == FAILED
    assert as_json(state)["lost"] == ["node1"]


def test_a_pack_whose_every_node_was_lost_is_stranded_and_a_requeued_one_starts_afresh() -> None:
    state, _ = starts(PackState.new(slots_of(["node1"], 1, 1), 2, None, 3), 0.0)
    assert not state.stranded  # one runs
    state = ended(nodes_lost(state, ["node1"]), 0, 143, 1.0, NODE_LOST)
    assert state.stranded and starts(state, 1.0)[1] == []
    again = from_json(as_json(state), slots_of(["node1"], 1, 1))  # the requeued job's allocation: Slurm's healthy
    assert again.lost == () and again.trials[0].losses == 1 and [start.index for start in starts(again, 2.0)[1]] == [0]


def test_a_trials_failure_is_worth_a_retry_by_the_rule_a_jobs_step_follows() -> None:
    from hpc_train.injob.pack.core import worth_a_retry

    assert worth_a_retry(137, True, ()) and worth_a_retry(143, False, ())  # a signal: it died under us
    assert worth_a_retry(69, False, ()) and not worth_a_retry(69, True, ())  # the trainer's lost peer
    assert not worth_a_retry(3, True, ()) and worth_a_retry(3, True, (3,))  # a program's own verdict, unless listed
    state, _ = starts(PackState.new(slots_of(["node1"], 1, 2), 2, None, 3), 0.0)
    state = ended(state, 0, 3, 1.0, retry=False)
    assert state.trials[0].state == FAILED and state.trials[0].attempts == 1  # retries left, none spent on it


def test_what_the_pack_says_of_a_trials_end() -> None:
    from hpc_train.injob.pack.core import Trial, end_words

    running = Trial(5, RUNNING, 0, 1)
    assert end_words(running, Trial(5, WAITING, attempts=1), None, 137, 1, True, True) == (
        "crashed (exit 137); retried on another share where one is free (attempt 2 of at most 2)")
    assert end_words(running, Trial(5, FAILED, attempts=1), None, 3, 1, False, True) == (
        "failed (exit 3); not retried: exit 3 is the program's own verdict, which a retry would repeat: list it in "
        "--retry-exit-codes to retry it")
    assert end_words(running, Trial(5, FAILED, attempts=1), None, 1, 1, False, False).endswith(
        "see its log; fix the cause, then resubmit (the trial resumes from its last checkpoint)")
    assert end_words(running, Trial(5, DONE, attempts=1), None, 0, 1, True, True) == "done"


# Giving nodes back (issue 48): which nodes the pack will not use again.

def test_a_node_whose_trials_all_ended_with_none_waiting_goes_back_and_the_batch_host_never_does() -> None:
    from hpc_train.injob.pack.core import nodes_released, to_release

    state, _ = starts(PackState.new(slots_of(["pk1", "pk2"], 1, 2), 4, None, 0), 0.0)  # 0,2 on pk1; 1,3 on pk2
    assert to_release(state, ["pk1", "pk2"], "pk1") == []  # every share busy
    state = ended(ended(state, 1, 0, 1.0), 3, 0, 2.0)  # pk2's trials both done, nothing waits
    assert to_release(state, ["pk1", "pk2"], "pk1") == ["pk2"]
    assert to_release(state, ["pk1", "pk2"], "pk2") == []  # pk2 runs the batch script: it stays
    state = nodes_released(state, ["pk2"], 2.5)
    assert as_json(state)["released"] == [{"node": "pk2", "at": 2.5, "done": 2}]
    assert to_release(state, ["pk1", "pk2"], "pk1") == []  # once is enough
    state = ended(ended(state, 0, 0, 3.0), 2, 0, 3.0)
    assert to_release(state, ["pk1", "pk2"], "pk1") == [] and state.finished  # pk1 ends with the job


def test_an_idle_node_stays_while_a_trial_waits_that_it_could_run() -> None:
    from hpc_train.injob.pack.core import to_release

    state, _ = starts(PackState.new(slots_of(["pk1", "pk2"], 1, 1), 3, None, 0), 0.0)  # 0 on pk1, 1 on pk2
    state = ended(state, 1, 0, 1.0)  # pk2 idle, trial 2 waits: it goes there next
    assert to_release(state, ["pk1", "pk2"], "pk1") == []
    state, launched = starts(state, 1.0)
    assert [(start.index, start.slot.nodes) for start in launched] == [(2, ("pk2",))]


def test_a_node_never_needed_under_max_parallel_goes_back_at_the_start_and_trials_fill_the_batch_host() -> None:
    from hpc_train.injob.pack.core import nodes_released, to_release

    state = PackState.new(slots_of(["pk1", "pk2"], 1, 4), 8, 3, 0)
    assert to_release(state, ["pk1", "pk2"], "pk1") == ["pk2"]  # 3 at once fit pk1's 4 shares
    state, launched = starts(nodes_released(state, ["pk2"], 0.0), 0.0)
    assert [start.slot.nodes for start in launched] == [("pk1",)] * 3  # the spreading only over the nodes kept
    assert to_release(PackState.new(slots_of(["pk1", "pk2"], 1, 4), 8, 5, 0), ["pk1", "pk2"], "pk1") == []
    state = PackState.new(slots_of(["a", "b", "c", "d", "e"], 2, 1), 3, None, 0)  # e is left over: never needed
    assert to_release(state, list("abcde"), "a") == ["e"]


def test_a_retry_keeps_a_node_away_from_its_crash_and_a_lost_node_goes_back() -> None:
    from hpc_train.injob.pack.core import release_refused, to_release

    state, _ = starts(PackState.new(slots_of(["pk1", "pk2"], 1, 1), 2, None, 1), 0.0)  # 0 on pk1, 1 on pk2
    state = ended(ended(state, 1, 0, 1.0), 0, 137, 1.0)  # 0 crashed on pk1 (the batch host): its retry needs pk2
    assert to_release(state, ["pk1", "pk2"], "pk1") == []
    state, launched = starts(state, 1.0)
    assert [(start.index, start.slot.nodes) for start in launched] == [(0, ("pk2",))]
    state, _ = starts(PackState.new(slots_of(["pk1", "pk2", "pk3"], 1, 1), 4, None, 0), 0.0)
    state = ended(nodes_lost(state, ["pk3"]), 2, 143, 1.0, NODE_LOST)  # it waits again, for pk1 or pk2
    assert to_release(state, ["pk1", "pk2", "pk3"], "pk1") == ["pk3"]  # lost: the job goes on without it
    assert to_release(release_refused(state, ["pk3"]), ["pk1", "pk2", "pk3"], "pk1") == []  # refused: not again


def test_a_retry_only_the_other_node_can_run_keeps_that_node_until_the_retry_ends() -> None:
    from hpc_train.injob.pack.core import to_release

    hosts = ["pk1", "pk2"]
    for cap in (None, 4):
        state, _ = starts(PackState.new(slots_of(hosts, 1, 2), 8, cap, 1), 0.0)  # 0,2 on pk1; 1,3 on pk2
        state, launched = starts(ended(ended(ended(ended(state, 0, 0, 1.0), 1, 0, 1.0), 2, 0, 1.0), 3, 0, 1.0), 1.0)
        assert [(start.index, start.slot.nodes) for start in launched] == [
            (4, ("pk1",)), (5, ("pk2",)), (6, ("pk1",)), (7, ("pk2",))]
        state = ended(ended(state, 5, 0, 2.0), 7, 3, 3.0)  # 7 crashed, pk2's last; 4 and 6 hold pk1's shares
        assert state.trials[7].state == WAITING and state.trials[7].avoid == ("pk2",)
        assert to_release(state, hosts, "pk1") == []  # only pk2 can run the retry: it stays
        crashed_on = state.trials[7].runs[-1]["slot"]
        state, launched = starts(state, 3.0)
        assert [(start.index, start.slot.nodes, start.attempt) for start in launched] == [(7, ("pk2",), 2)]
        assert launched[0].slot.index != crashed_on  # pk2's other share, 5's: the one it crashed on may be the cause
        assert to_release(state, hosts, "pk1") == []  # the retry runs there
        state = ended(state, 7, 0, 4.0)
        assert to_release(state, hosts, "pk1") == ["pk2"]  # then nothing waits that pk2 could run


def test_a_multi_node_trials_nodes_go_back_when_it_ends_and_a_requeued_pack_is_whole_again() -> None:
    from hpc_train.injob.pack.core import nodes_released, to_release

    hosts = ["a", "b", "c", "d"]
    state, _ = starts(PackState.new(slots_of(hosts, 2, 1), 3, None, 0), 0.0)  # 0 on a,b; 1 on c,d
    state = ended(state, 1, 0, 1.0)
    assert to_release(state, hosts, "a") == []  # trial 2 waits for two nodes: c,d are free
    state, _ = starts(state, 1.0)
    state = nodes_released(ended(state, 2, 0, 2.0), to_release(ended(state, 2, 0, 2.0), hosts, "a"), 2.0)
    assert state.gone == ["c", "d"] and state.usable_slots() == [state.slots[0]]
    again = from_json(as_json(state), slots_of(hosts, 2, 1))
    assert again.released == () and len(again.usable_slots()) == 2



@settings(max_examples=150, deadline=None)
@given(st.integers(1, 4), st.integers(1, 3), st.integers(1, 2), st.integers(0, 9), st.one_of(st.none(),
       st.integers(1, 6)), st.lists(st.tuples(st.integers(0, 9), st.sampled_from([0, 1, 137]), st.booleans()),
                                    max_size=30))
def test_giving_nodes_back_never_holds_back_a_trial_that_would_start(hosts: int, per_node: int, share_nodes: int,
                                                                     count: int, cap: int | None,
                                                                     events: list[tuple[int, int, bool]]) -> None:
    """Whatever happened so far, the nodes to_release picks are never the batch host nor a running trial's, and
    the trials that start now are as many as on the whole allocation."""
    from hpc_train.injob.pack.core import nodes_released, to_release

    names = [f"n{number}" for number in range(hosts)]
    state = PackState.new(slots_of(names, share_nodes, per_node), count, cap, 1)
    clock = 0.0
    for pick, code, lose in events:
        clock += 1.0
        gone = to_release(state, names, names[0])
        running = {node for trial in state.running for node in state.slots[trial.slot].nodes}
        assert names[0] not in gone and not set(gone) & running
        kept, launched_kept = starts(nodes_released(state, gone, clock), clock)
        whole, launched_whole = starts(state, clock)
        assert len(launched_kept) == len(launched_whole)
        state = kept
        if lose and state.running and hosts > 1:
            state = nodes_lost(state, [names[-1]])
        if state.running:
            trial = state.running[pick % len(state.running)]
            state = ended(state, trial.index, code, clock, NODE_LOST if on_lost_node(state, trial.index) else None)
