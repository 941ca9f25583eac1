"""TensorFlow's custom-training-loop multi-worker tutorial, in its shape: `tf.keras`, `distribute_datasets_from_function`,
a `tf.function` step, a metric's `reset_states()`, and a checkpoint after every epoch that a rerun resumes from.
Under hpc-train it runs as it is:

    hpc-train submit --nodes 2 -- python examples/custom_loop.py
    hpc-train submit --nodes 2 --local -- python examples/custom_loop.py     # without Slurm

Its checkpoints go to $HPC_TRAIN_RUN_DIR (the job's folder) when hpc-train runs it, else to /tmp/keras-model, as
in the tutorial. `reset_states()` is tf-keras' name (Keras 3 renamed it): hpc-train makes `tf.keras` tf-keras.
"""

import json
import os

import numpy as np
import tensorflow as tf

per_worker_batch_size = 64
num_epochs = 3
num_steps_per_epoch = 20


def mnist_dataset():
    """28x28 images of 10 classes, made (the tutorial downloads MNIST): class k is a band of brighter rows."""
    rng = np.random.default_rng(0)
    y_train = rng.integers(0, 10, 6000)
    x_train = rng.random((6000, 28, 28)).astype(np.float32) * 0.5
    for index, label in enumerate(y_train):
        x_train[index, 2 * label:2 * label + 3, :] += 0.5
    return tf.data.Dataset.from_tensor_slices((x_train, y_train)).shuffle(6000, seed=0).repeat()


def dataset_fn(global_batch_size, input_context):
    batch_size = input_context.get_per_replica_batch_size(global_batch_size)
    dataset = mnist_dataset()
    dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    return dataset.batch(batch_size)


def build_cnn_model():
    return tf.keras.Sequential([
        tf.keras.layers.InputLayer(input_shape=(28, 28)),
        tf.keras.layers.Reshape(target_shape=(28, 28, 1)),
        tf.keras.layers.Conv2D(32, 3, activation="relu"),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(128, activation="relu"),
        tf.keras.layers.Dense(10),
    ])


def _is_chief(task_type, task_id, cluster_spec):
    return (task_type is None or task_type == "chief"
            or (task_type == "worker" and task_id == 0 and "chief" not in cluster_spec.as_dict()))


def write_filepath(filepath, task_type, task_id, cluster_spec):
    """The chief writes where it should; the others into a temporary folder of their own (the tutorial's)."""
    dirpath, base = os.path.split(filepath)
    if not _is_chief(task_type, task_id, cluster_spec):
        dirpath = os.path.join(dirpath, f"workertemp_{task_id}")
        tf.io.gfile.makedirs(dirpath)
    return os.path.join(dirpath, base)


tf_config = json.loads(os.environ["TF_CONFIG"])
num_workers = len(tf_config["cluster"]["worker"])
global_batch_size = per_worker_batch_size * num_workers

strategy = tf.distribute.MultiWorkerMirroredStrategy()
multi_worker_dataset = strategy.distribute_datasets_from_function(lambda context: dataset_fn(global_batch_size,
                                                                                             context))

with strategy.scope():
    multi_worker_model = build_cnn_model()
    optimizer = tf.keras.optimizers.RMSprop(learning_rate=0.001)
    train_accuracy = tf.keras.metrics.SparseCategoricalAccuracy(name="train_accuracy")


@tf.function
def train_step(iterator):
    def step_fn(inputs):
        x, y = inputs
        with tf.GradientTape() as tape:
            predictions = multi_worker_model(x, training=True)
            per_example_loss = tf.keras.losses.SparseCategoricalCrossentropy(
                from_logits=True, reduction=tf.keras.losses.Reduction.NONE)(y, predictions)
            loss = tf.nn.compute_average_loss(per_example_loss)
        grads = tape.gradient(loss, multi_worker_model.trainable_variables)
        optimizer.apply_gradients(zip(grads, multi_worker_model.trainable_variables))
        train_accuracy.update_state(y, predictions)
        return loss

    per_replica_losses = strategy.run(step_fn, args=(next(iterator),))
    return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica_losses, axis=None)


checkpoint_dir = os.path.join(os.environ.get("HPC_TRAIN_RUN_DIR", "/tmp/keras-model"), "ckpt")
epoch = tf.Variable(initial_value=tf.constant(0, dtype=tf.dtypes.int64), name="epoch")
step_in_epoch = tf.Variable(initial_value=tf.constant(0, dtype=tf.dtypes.int64), name="step_in_epoch")
task_type, task_id = strategy.cluster_resolver.task_type, strategy.cluster_resolver.task_id
cluster_spec = strategy.cluster_resolver.cluster_spec()

checkpoint = tf.train.Checkpoint(model=multi_worker_model, epoch=epoch, step_in_epoch=step_in_epoch)
write_checkpoint_dir = write_filepath(checkpoint_dir, task_type, task_id, cluster_spec)
checkpoint_manager = tf.train.CheckpointManager(checkpoint, directory=write_checkpoint_dir, max_to_keep=1)

latest_checkpoint = tf.train.latest_checkpoint(checkpoint_dir)
if latest_checkpoint:
    checkpoint.restore(latest_checkpoint)
    print(f"resumed at epoch {int(epoch.numpy())} from {latest_checkpoint}", flush=True)

while epoch.numpy() < num_epochs:
    iterator = iter(multi_worker_dataset)
    total_loss = 0.0
    num_batches = 0
    while step_in_epoch.numpy() < num_steps_per_epoch:
        total_loss += train_step(iterator)
        num_batches += 1
        step_in_epoch.assign_add(1)
    train_loss = total_loss / num_batches
    print(f"Epoch: {int(epoch.numpy())}, accuracy: {float(train_accuracy.result()):f}, "
          f"train_loss: {float(train_loss):f}.", flush=True)
    train_accuracy.reset_states()
    checkpoint_manager.save()
    if not _is_chief(task_type, task_id, cluster_spec):
        tf.io.gfile.rmtree(write_checkpoint_dir)
    epoch.assign_add(1)
    step_in_epoch.assign(0)
print(f"done: worker {task_id}", flush=True)
