"""What TensorFlow's data service changes about an exact resume (docs/data_service.md#the-trade-example-order).

Two ranks read a stream of batches of example ids as the trainer reads its training stream (training/served.py):

- without the service, each rank its own pipeline (its shard of the stream), resumed by skipping the batches it
  had read;
- with the service (a dispatcher and WORKERS data workers in this process, `distributed_epoch`, one job name per
  attempt), every rank the whole stream through the service, resumed by skipping the batches the job had read in
  all, under a new job name (as a requeued attempt does).

Each is stopped after STOP batches per rank and resumed to the end of one pass over EXAMPLES examples; the script
counts the examples of that pass read twice and never read, and how far the order read strays from the stream's.
Run it on an idle machine:

    .venv/bin/python benchmarks/data_service_resume.py [EXAMPLES] [BATCH] [STOP] [WORKERS] [RUNS]
"""

from __future__ import annotations

import sys
from collections import Counter

import tensorflow as tf

from hpc_train.data_service.environment import skip_per_worker

RANKS = 2


def stream(examples: int, batch: int) -> tf.data.Dataset:
    # A little work per batch, as a pipeline's maps would do, so that the workers interleave as they do for real.
    return tf.data.Dataset.range(examples).batch(batch, drop_remainder=True).map(
        lambda ids: (ids, tf.reduce_sum(tf.random.uniform([64, 64]) @ tf.random.uniform([64, 64]))),
        num_parallel_calls=tf.data.AUTOTUNE).map(lambda ids, _: ids)


def read(iterators: list, batches: int) -> list[list[int]]:
    """`batches` batches in all, the ranks taking turns as synchronous steps do (a rank whose iterator ended, which
    the service's uneven shares allow at the pass's end, drops out)."""
    out: list[list[int]] = []
    live = list(iterators)
    while live and len(out) < batches:
        for iterator in list(live):
            if len(out) == batches:
                break
            try:
                out.append(next(iterator).numpy().tolist())
            except StopIteration:
                live.remove(iterator)
    return out


def without_service(examples: int, batch: int, stop: int) -> list[list[int]]:
    total = examples // batch // RANKS
    first = read([iter(stream(examples, batch).shard(RANKS, rank)) for rank in range(RANKS)], stop * RANKS)
    return first + read([iter(stream(examples, batch).shard(RANKS, rank).skip(stop)) for rank in range(RANKS)],
                        (total - stop) * RANKS)


def with_service(examples: int, batch: int, stop: int, address: str, run: int, workers: int,
                 shared: bool) -> list[list[int]]:
    total = examples // batch // RANKS

    def through(dataset: tf.data.Dataset, job: str) -> list:
        return [iter(dataset.apply(tf.data.experimental.service.distribute(
            "distributed_epoch", address, job_name=job))) for _ in range(RANKS)]

    first = read(through(stream(examples, batch), f"run{run}-attempt1"), stop * RANKS)
    # The next attempt: the whole stream after the batches the job had read in all (stop per rank, RANKS ranks), as
    # training/served.py skips them: each data worker its share (`shared`), or, as before, the whole on each.
    skip = skip_per_worker(stop * RANKS, workers) if shared else stop * RANKS
    return first + read(through(stream(examples, batch).skip(skip), f"run{run}-attempt2"), (total - stop) * RANKS)


def measures(batches: list[list[int]], examples: int, batch: int) -> tuple[int, int, float]:
    """(examples read twice or more, examples of the pass never read, share of batches read out of stream order)."""
    counts = Counter(example for ids in batches for example in ids)
    passed = examples // batch // RANKS * RANKS * batch  # the batches an uninterrupted job reads (RANKS at a step)
    twice = sum(1 for count in counts.values() if count > 1)
    never = sum(1 for example in range(passed) if example not in counts)
    firsts = [ids[0] // batch for ids in batches]
    out_of_order = sum(1 for index, first in enumerate(firsts) if first != index) / max(1, len(firsts))
    return twice, never, out_of_order


def main(argv: list[str]) -> None:
    examples, batch, stop, workers, runs = (int(value) for value in (argv + ["60000", "64", "100", "2", "3"][len(argv):]))
    print(f"{examples} examples, batches of {batch}, {RANKS} ranks stopped after {stop} batches each and resumed; "
          f"{workers} data worker(s); TensorFlow {tf.__version__}")
    exact = measures(without_service(examples, batch, stop), examples, batch)
    print(f"without the service: read twice {exact[0]}, never read {exact[1]}, batches out of stream order "
          f"{exact[2]:.0%} (each rank its shard: in order within it)")
    dispatcher = tf.data.experimental.service.DispatchServer(tf.data.experimental.service.DispatcherConfig(port=0))
    servers = [tf.data.experimental.service.WorkerServer(tf.data.experimental.service.WorkerConfig(
        dispatcher_address=dispatcher.target.split("://")[1])) for _ in range(workers)]
    for shared in (False, True):
        how = "each worker skips its share" if shared else "each worker skips the whole (before)"
        for run in range(runs):
            served = measures(with_service(examples, batch, stop, dispatcher.target, 2 * run + shared, workers,
                                           shared), examples, batch)
            print(f"with the service, {how}, run {run + 1}: read twice {served[0]} ({served[0] / examples:.2%}), "
                  f"never read {served[1]} ({served[1] / examples:.2%}), batches out of stream order {served[2]:.0%}")
    del servers


if __name__ == "__main__":
    main(sys.argv[1:])
