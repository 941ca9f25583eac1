"""TensorFlow's own preemption support on Slurm: `tf.distribute.experimental.PreemptionCheckpointHandler`.

Off Google Cloud the handler watches SIGTERM: on it, every worker saves a checkpoint at the same step and exits
with 42, TensorFlow's code for "restart me". Ask hpc-train to pass Slurm's time-limit warning on as SIGTERM, and a
warned job saves, is requeued (42 counts as 75 does), and the rerun resumes at the step it stopped at:

    hpc-train submit --nodes 2 --command-signal TERM -- python examples/preemption.py
    hpc-train submit --nodes 2 --local --command-signal TERM -- python examples/preemption.py   # without Slurm
    hpc-train submit --nodes 2 --command-signal TERM -- python examples/preemption.py --epochs 20  # longer

Checkpoints go to $HPC_TRAIN_RUN_DIR (the job's folder) when hpc-train runs it, else to /tmp/preemption.
"""

import argparse
import os

import numpy as np
import tensorflow as tf

parser = argparse.ArgumentParser(description="TensorFlow's PreemptionCheckpointHandler under hpc-train")
parser.add_argument("--epochs", type=int, default=10, help="epochs of 30 steps (default: 10)")
EPOCHS = parser.parse_args().epochs
STEPS_PER_EPOCH = 30
PER_WORKER_BATCH = 64


def dataset(global_batch):
    """Made data: the label says whether the first half of the 16 features outweighs the second."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4096, 16)).astype(np.float32)
    y = (x[:, :8].sum(axis=1) > x[:, 8:].sum(axis=1)).astype(np.int64)
    return tf.data.Dataset.from_tensor_slices((x, y)).shuffle(4096, seed=0).repeat().batch(global_batch)


strategy = tf.distribute.MultiWorkerMirroredStrategy()
global_batch = PER_WORKER_BATCH * strategy.num_replicas_in_sync

with strategy.scope():
    model = tf.keras.Sequential([tf.keras.layers.Dense(64, activation="relu", input_shape=(16,)),
                                 tf.keras.layers.Dense(2)])
    optimizer = tf.keras.optimizers.SGD(learning_rate=0.05)
    loss_object = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True,
                                                                reduction=tf.keras.losses.Reduction.NONE)


@tf.function
def distributed_train_step(iterator):
    def step_fn(inputs):
        x, y = inputs
        with tf.GradientTape() as tape:
            loss = tf.nn.compute_average_loss(loss_object(y, model(x, training=True)), global_batch_size=global_batch)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(step_fn, args=(next(iterator),)), axis=None)


checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer)
checkpoint_dir = os.path.join(os.environ.get("HPC_TRAIN_RUN_DIR", "/tmp/preemption"), "preemption-checkpoints")
# Restores the newest checkpoint, if any; from here on, SIGTERM means: save at the next step, then exit 42.
handler = tf.distribute.experimental.PreemptionCheckpointHandler(strategy.cluster_resolver, checkpoint, checkpoint_dir)
# The input pipeline after the handler: the earlier the handler watches SIGTERM, the fewer warnings it misses.
iterator = iter(strategy.experimental_distribute_dataset(dataset(global_batch)))
# The steps taken so far: the optimizer counts them, and the checkpoint holds the optimizer.
steps_done = int(optimizer.iterations.numpy())
print(f"starting at step {steps_done}", flush=True)

for epoch in range(steps_done // STEPS_PER_EPOCH, EPOCHS):
    for step in range(int(optimizer.iterations.numpy()) % STEPS_PER_EPOCH, STEPS_PER_EPOCH):
        loss = handler.run(distributed_train_step, iterator)
    print(f"epoch {epoch + 1}/{EPOCHS}: loss {float(loss):.4f}", flush=True)
print(f"done at step {int(optimizer.iterations.numpy())}", flush=True)
