"""A job's data service as values: what the flags and the YAML give, and what is refused in one line."""

from __future__ import annotations

import pytest

from hpc_train.spec.data_service import DataService, DataServiceError, from_settings


def test_flags_win_over_the_yaml_and_the_yaml_fills_the_rest() -> None:
    service = from_settings("3", None, None, {"workers": 1, "partition": "cpu", "cpus": 2})
    assert service == DataService(3, "cpu", 2)
    assert service.processes == 4
    assert service.job_line_options() == ["--data-workers", "3", "--data-cpus", "2", "--data-partition", "cpu"]


def test_no_workers_is_no_service() -> None:
    assert from_settings(None, None, None, None) is None
    assert from_settings(None, None, None, {}) is None


@pytest.mark.parametrize("workers, partition, cpus, section, said", [
    ("0", None, None, None, "--data-workers 0: must be a whole number of 1 or more"),
    ("-2", None, None, None, "--data-workers -2"),
    ("two", None, None, None, "--data-workers 'two'"),
    ("2", None, "0", None, "--data-cpus 0"),
    ("2", "a b", None, None, "--data-partition 'a b'"),
    (None, "cpu", None, None, "--data-partition applies to a job's data service: add --data-workers N"),
    (None, None, "4", None, "--data-cpus applies"),
    (None, None, None, {"worker": 2}, "'worker' is not one of its keys"),
    (None, None, None, {"workers": True}, "--data-workers True"),
    ("auto", "cpu", None, None, "--data-workers auto with --data-partition cpu: the service's partition holds as "
                                "many workers as asked at submit; give a number (--data-workers N)"),
])
def test_what_cannot_be_is_refused_in_words(workers, partition, cpus, section, said) -> None:
    with pytest.raises(DataServiceError) as raised:
        from_settings(workers, partition, cpus, section)
    assert said in str(raised.value) and "\n" not in str(raised.value)


def test_auto_starts_with_one_worker_and_holds_ports_for_the_most() -> None:
    from hpc_train.spec.data_service import AUTO_MOST

    service = from_settings("auto", None, "2", None)
    assert service == DataService(1, None, 2, auto=True) == from_settings(None, None, None, {"workers": "Auto",
                                                                                             "cpus": 2})
    assert (service.most, service.processes, service.asked) == (AUTO_MOST, AUTO_MOST + 1, "auto")
    assert service.job_line_options() == ["--data-workers", "auto", "--data-cpus", "2"]
    assert service.words() == f"tf.data service: auto-sized data workers (1 to {AUTO_MOST}) of 2 CPU(s) beside the ranks"
    assert DataService(3).most == 3 and DataService(3).asked == "3"
