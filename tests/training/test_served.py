"""The trainer's stream through a data service (a real dispatcher and worker, in this process): the whole stream,
after what every pipeline read, shared by the ranks; without a service, the pipeline's own stream untouched."""

from __future__ import annotations

import pytest

from hpc_train.data_service.environment import ServiceEnv
from hpc_train.training.keras import tf
from hpc_train.training.served import training_stream


def recording_stream(calls: list[tuple[int, int, int]]):
    def stream(context: tf.distribute.InputContext, skipped: int) -> tf.data.Dataset:
        calls.append((context.num_input_pipelines, context.input_pipeline_id, skipped))
        return tf.data.Dataset.range(skipped, 2**62)  # endless, as the trainer's stream
    return stream


def test_without_a_service_the_pipeline_reads_its_own_share() -> None:
    calls: list[tuple[int, int, int]] = []
    dataset = training_stream(recording_stream(calls), tf.distribute.InputContext(2, 1, 2), 3, env={})
    assert calls == [(2, 1, 3)] and int(next(iter(dataset))) == 3


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> ServiceEnv:
    journal = str(tmp_path_factory.mktemp("journal"))
    dispatcher = tf.data.experimental.service.DispatchServer(tf.data.experimental.service.DispatcherConfig(
        port=0, work_dir=journal, fault_tolerant_mode=True))
    address = dispatcher.target.split("://")[1]
    worker = tf.data.experimental.service.WorkerServer(tf.data.experimental.service.WorkerConfig(
        dispatcher_address=address))
    yield ServiceEnv(dispatcher.target, "test-served")
    worker.stop()
    dispatcher.stop()


def test_with_a_service_every_rank_reads_the_whole_stream_after_all_that_was_read(
        service: ServiceEnv, capsys: pytest.CaptureFixture[str]) -> None:
    calls: list[tuple[int, int, int]] = []
    ranks = [training_stream(recording_stream(calls), tf.distribute.InputContext(2, rank, 2), 5,
                             env=service.environ()) for rank in range(2)]
    assert calls == [(1, 0, 10), (1, 0, 10)]  # the whole stream (one pipeline), after 2 pipelines x 5 batches
    assert all(int(rank.cardinality()) == tf.data.INFINITE_CARDINALITY for rank in ranks)
    streams = [iter(rank) for rank in ranks]
    seen = [int(next(stream)) for _ in range(15) for stream in streams]  # the two ranks read side by side
    assert len(set(seen)) == 30 and min(seen) >= 10  # none read twice, none of those read before
    assert "training input through the data service" in capsys.readouterr().err


def test_each_data_worker_skips_its_share_of_what_the_job_read(service: ServiceEnv) -> None:
    """3 workers: each runs the stream's skip on its own share of the source, so each skips a third of the 2 x 6
    batches the job's 2 pipelines read (benchmarks/data_service_resume.py measured the whole skip run on each)."""
    from dataclasses import replace

    calls: list[tuple[int, int, int]] = []
    training_stream(recording_stream(calls), tf.distribute.InputContext(2, 0, 2), 6,
                    env=replace(service, workers=3, job_name="test-served-3").environ())
    assert calls == [(1, 0, 4)]
