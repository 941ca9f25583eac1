"""Input pipelines: disjoint shares per worker, a fresh order each pass, and a position that resumes exactly."""

from __future__ import annotations

import numpy as np
import pytest

from hpc_train.tasks.mnist.pipeline import validation_plan

pytestmark = pytest.mark.tensorflow
IMAGES = 40


@pytest.mark.parametrize("images, replicas, plan", [
    (2000, 1, (500, 4)), (2000, 2, (500, 2)), (2000, 3, (333, 2)), (7, 2, (3, 1)), (997, 1, (1, 997)),
])
def test_validation_reads_each_image_once_when_shared_evenly(images: int, replicas: int,
                                                             plan: tuple[int, int]) -> None:
    assert validation_plan(images, replicas) == plan


def labelled_images() -> tuple[np.ndarray, np.ndarray]:
    """Image i is filled with the value i, and labelled i: a batch tells which images it holds."""
    images = np.repeat(np.arange(IMAGES, dtype=np.uint8), 28 * 28).reshape(IMAGES, 28, 28)
    return images, np.arange(IMAGES, dtype=np.uint8)


def batches(pipelines: int, pipeline: int, count: int, steps_done: int = 0, batch: int = 3) -> list[list[int]]:
    """The labels of `count` batches that pipeline `pipeline` of `pipelines` reads after `steps_done` steps."""
    from hpc_train.training.keras import tf
    from hpc_train.tasks.mnist.pipeline import training_dataset_fn

    images, labels = labelled_images()
    make = training_dataset_fn(images, labels, per_replica_batch=batch, seed=7, batches_done=steps_done)
    context = tf.distribute.InputContext(num_input_pipelines=pipelines, input_pipeline_id=pipeline,
                                         num_replicas_in_sync=pipelines)
    read = []
    for image_batch, label_batch in make(context).take(count).as_numpy_iterator():
        assert image_batch.shape == (batch, 28, 28, 1) and image_batch.dtype == np.float32
        assert np.allclose(image_batch[:, 0, 0, 0] * 255, label_batch)  # normalised, and the image of its label
        read.append([int(label) for label in label_batch])
    return read


def test_each_worker_reads_its_own_share_and_each_pass_is_a_new_order() -> None:
    per_pass = (IMAGES // 2) // 3  # 6 batches of 3 from each worker's 20 images
    shares = [batches(2, pipeline, 2 * per_pass) for pipeline in range(2)]
    first_pass = [{label for batch in share[:per_pass] for label in batch} for share in shares]
    assert not first_pass[0] & first_pass[1] and all(len(seen) == 18 for seen in first_pass)
    assert shares[0][:per_pass] != shares[0][per_pass:]  # reshuffled for the second pass


@pytest.mark.parametrize("steps_done", [0, 1, 5, 6, 7, 20])
def test_a_resumed_pipeline_continues_with_the_batch_that_was_next(steps_done: int) -> None:
    for pipeline in range(2):
        whole = batches(2, pipeline, steps_done + 4)
        assert batches(2, pipeline, 4, steps_done=steps_done) == whole[steps_done:]


def test_too_few_images_for_a_batch_per_worker_is_refused() -> None:
    with pytest.raises(ValueError, match="cannot give 2 input pipeline"):
        batches(2, 0, 1, batch=32)


def test_the_training_stream_says_it_is_endless() -> None:
    # Else MultiWorkerMirrored asks every worker before each step whether one ran out (an all-reduce per step).
    from hpc_train.training.keras import tf
    from hpc_train.tasks.mnist.pipeline import training_dataset_fn

    images, labels = labelled_images()
    dataset = training_dataset_fn(images, labels, per_replica_batch=3, seed=0, batches_done=2)(None)
    assert dataset.cardinality().numpy() == tf.data.INFINITE_CARDINALITY


@pytest.mark.parametrize("steps_done", [0, 5])
def test_every_global_step_reads_the_same_images_at_every_size(steps_done: int) -> None:
    """A node range's attempts share one global batch of 12 among 1, 2, 3 or 4 workers: global step s reads the same
    12 images at every size, also after a resume at another size (3 passes: the pass boundary is the same)."""
    steps = 8  # 40 images: 3 global batches of 12 a pass
    by_size = {}
    for workers in (1, 2, 3, 4):
        shares = [batches(workers, worker, steps, steps_done, batch=12 // workers) for worker in range(workers)]
        by_size[workers] = [sorted(label for share in shares for label in share[step]) for step in range(steps)]
    assert by_size[1] == by_size[2] == by_size[3] == by_size[4]
    assert all(len(set(step)) == 12 for step in by_size[1])
