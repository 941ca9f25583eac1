"""A plain MultiWorkerMirroredStrategy script, as people write them: no hpc-train import.

Run it on every task of a job; hpc-train gives each its TF_CONFIG:

    hpc-train submit --nodes 2 -- python examples/seed_multiworker.py --epochs 20
    hpc-train submit --nodes 2 --local -- python examples/seed_multiworker.py     # without Slurm

It saves a checkpoint after every epoch (worker 0 into $HPC_TRAIN_RUN_DIR, or
--output; the others into a scratch folder, as MultiWorkerMirrored wants) and
resumes from the newest one when started again, exactly: it ends with the same
weights as a run never stopped. Slurm's time-limit warning reaches it as
SIGUSR1, and SIGTERM comes when Slurm preempts or cancels the job: either way
every worker stops after the same epoch (they agree with one all-reduce),
saves, and exits 75; after the warning, hpc-train requeues the job. So keep an
epoch well shorter than the warning (120 s by default) and Slurm's KillWait
(often 30 s, between SIGTERM and SIGKILL).
"""

import argparse
import atexit
import hashlib
import os
import shutil
import signal
import sys
import tempfile

import numpy as np
import tensorflow as tf
import tf_keras as keras

EXIT_GO_ON_LATER = 75  # saved, not finished: hpc-train requeues a warned job, and this script resumes
stop_signal = None  # the name of the signal that asked us to stop, if one did


def on_stop_signal(signum, frame):
    global stop_signal
    stop_signal = signal.Signals(signum).name  # acted on at the epoch's end: saving inside a handler is unsafe


def make_data(seed=0, examples=4096):
    """Made, not downloaded: the label says whether the first half of the features outweighs the second."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(examples, 16)).astype("float32")
    y = (x[:, :8].sum(axis=1) > x[:, 8:].sum(axis=1)).astype("int64")
    return x, y


def dataset(x, y, first_epoch, epochs, global_batch):
    """The epochs still to train, back to back: each epoch's order is fixed by its number, so a resumed
    run reads the very batches a run never stopped would have."""

    def one_epoch(number):  # a permutation made from the number alone: the same on every worker and run
        order = tf.argsort(tf.random.stateless_uniform([len(x)], seed=tf.stack([number, 0])))
        return tf.data.Dataset.from_tensor_slices((tf.gather(x, order), tf.gather(y, order)))

    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return (tf.data.Dataset.range(first_epoch, epochs).flat_map(one_epoch)
            .batch(global_batch, drop_remainder=True).with_options(options))


class SaveAndStop(keras.callbacks.Callback):
    """After every epoch: save, then stop if any worker was signalled (all of them, after the same epoch)."""

    def __init__(self, strategy, manager, epoch, epochs):
        super().__init__()
        self.manager, self.epoch, self.epochs = manager, epoch, epochs
        self.stopped = None  # why every worker stopped early, if they did

        @tf.function
        def anyone(flags):  # one tiny all-reduce: a worker that stopped alone would leave the others hanging
            return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(lambda: tf.identity(flags)), axis=None)

        self.anyone = anyone

    def on_epoch_end(self, index, logs=None):
        self.epoch.assign(index + 1)
        self.manager.save(checkpoint_number=index + 1)  # every worker takes part in a save
        print(f"epoch {index + 1}/{self.epochs} loss {logs['loss']:.4f}", flush=True)
        # Workers signalled with USR1, with TERM: every worker learns both, so all stop and say why alike.
        warned, terminated = self.anyone(tf.constant([stop_signal == "SIGUSR1", stop_signal == "SIGTERM"],
                                                     tf.float32)).numpy()
        if (warned or terminated) and index + 1 < self.epochs:
            self.stopped = "stopped by SIGTERM" if terminated else "warned"
            self.model.stop_training = True


def is_chief(resolver):
    # With no TF_CONFIG (one process) the task type is None: that process is the chief.
    return resolver.task_type in (None, "chief") or (resolver.task_type == "worker" and resolver.task_id == 0)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=32, help="per worker")
    parser.add_argument("--output", default=os.environ.get("HPC_TRAIN_RUN_DIR", "runs/seed"))
    args = parser.parse_args()

    strategy = tf.distribute.MultiWorkerMirroredStrategy()  # reads TF_CONFIG
    # After the strategy: creating it sets TensorFlow's own SIGTERM handler, which would replace ours.
    for signum in (signal.SIGUSR1, signal.SIGTERM):
        signal.signal(signum, on_stop_signal)
    chief = is_chief(strategy.cluster_resolver)
    # Every worker takes part in a save (it is collective), but only the chief's is kept.
    folder = args.output if chief else tempfile.mkdtemp(prefix="seed-worker-")
    if not chief:
        atexit.register(shutil.rmtree, folder, ignore_errors=True)

    x, y = make_data()
    global_batch = args.batch_size * strategy.num_replicas_in_sync
    with strategy.scope():
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(32, activation="relu"),
                                  keras.layers.Dense(2)])
        model.compile(optimizer=keras.optimizers.legacy.Adam(0.01),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
        epoch = tf.Variable(0, dtype=tf.int64)
    checkpoint = tf.train.Checkpoint(model=model, optimizer=model.optimizer, epoch=epoch)
    manager = tf.train.CheckpointManager(checkpoint, os.path.join(folder, "checkpoints"), max_to_keep=2)
    latest = tf.train.latest_checkpoint(os.path.join(args.output, "checkpoints"))
    if latest:  # every worker restores the chief's checkpoint (the run folder is on a shared file system)
        checkpoint.restore(latest)
        print(f"resuming after epoch {int(epoch.numpy())}", flush=True)

    first = int(epoch.numpy())
    stopper = SaveAndStop(strategy, manager, epoch, args.epochs)
    history = model.fit(dataset(x, y, first, args.epochs, global_batch), epochs=args.epochs, initial_epoch=first,
                        steps_per_epoch=len(x) // global_batch, callbacks=[stopper], verbose=0)
    if stopper.stopped:
        print(f"{stopper.stopped}: saved after epoch {int(epoch.numpy())}; exiting {EXIT_GO_ON_LATER} to go on "
              "later", flush=True)
        sys.exit(EXIT_GO_ON_LATER)
    # The all-reduce gives every worker the same update, so all of them end with the very same weights.
    digest = hashlib.sha256(b"".join(w.tobytes() for w in model.get_weights())).hexdigest()[:16]
    loss = history.history["loss"][-1] if history.history else float("nan")  # nan: nothing was left to train
    print(f"done: final loss {loss:.4f}; weights digest {digest}", flush=True)


if __name__ == "__main__":
    main()
