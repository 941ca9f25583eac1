"""The baseline of `hpc-train bench task`: the same task in a plain `model.fit`, as a user would run it.

The task module's own build_model() and train_dataset() (the same pipeline,
repeated), then `model.fit(dataset, epochs=E, steps_per_epoch=S)` with Keras'
defaults: one step per call into TensorFlow, fit's progress bar. No hpc-train
code runs in between. It prints each epoch's training examples/s (timed from
epoch begin to epoch end by a callback) as JSON on its last line:

    python -m hpc_train.bench.plain_fit EPOCHS STEPS_PER_EPOCH [--batch-size 64]

TensorFlow's own settings apply (oneDNN kernels off on AVX2 CPUs); the
benchmark also runs it with TF_ENABLE_ONEDNN_OPTS=1, the trainer's default.
"""

import argparse
import json
import os
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("epochs", type=int)
    parser.add_argument("steps_per_epoch", type=int)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    import tf_keras as keras

    from hpc_train.bench import bench_task
    from hpc_train.bench.epoch_timer import fit_timed

    model = bench_task.build_model()
    dataset = bench_task.train_dataset(tf.distribute.InputContext(), args.batch_size).repeat()
    seconds = fit_timed(model, dataset, keras, args.epochs, args.steps_per_epoch)
    examples = args.steps_per_epoch * args.batch_size
    print(json.dumps({"examples_per_second": [examples / value for value in seconds], "seconds": seconds}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
