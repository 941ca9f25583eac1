"""The goodput ledger's cost: the trainer's model and step (the default CNN, batch 64, steps_per_execution 32, Adam,
mixed precision as `auto` picks it) with the ledger's callback (training/goodput.py: its iterator's waits stamped
inside the compiled train function, its window timed per call) and without it, side by side in one process.

ROUNDS alternating rounds of STEPS steps each (ledger on, off, on, off ...) on random images from a cached,
prefetched dataset, after a warm-up fit of each; prints the CPU (lscpu), each round's images/s, the medians and
their ratio. Issue 44 asks for at least 0.99 (the ledger on keeps 99% of the images/s).

    python benchmarks/ledger_overhead.py [ROUNDS] [STEPS]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

os.environ["TF_USE_LEGACY_KERAS"] = "1"
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from hpc_train.tasks.mnist.model import build_model, compile_model  # noqa: E402
from hpc_train.training.goodput import Goodput  # noqa: E402
from hpc_train.training.keras import keras, tf  # noqa: E402

BATCH, STEPS_PER_EXECUTION = 64, 32


def cpu_name() -> str:
    try:
        lines = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        return "unknown CPU (no lscpu)"
    fields = {key.strip(): value.strip() for key, _, value in (line.partition(":") for line in lines)}
    return f"{fields.get('Model name', '?')}, {fields.get('CPU(s)', '?')} CPUs"


def data() -> tf.data.Dataset:
    images = tf.random.stateless_uniform((BATCH * 16, 28, 28, 1), seed=(1, 2))
    labels = tf.random.stateless_uniform((BATCH * 16,), seed=(3, 4), maxval=10, dtype=tf.int32)
    return tf.data.Dataset.from_tensor_slices((images, labels)).batch(BATCH).cache().repeat().prefetch(
        tf.data.AUTOTUNE)


def trained(ledger: bool) -> tuple[keras.Model, list[keras.callbacks.Callback]]:
    keras.utils.set_random_seed(0)
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    model = build_model("cnn")
    compile_model(model, "adam", 1e-3, STEPS_PER_EXECUTION)
    callbacks = [Goodput()] if ledger else []
    for _ in range(2):  # warm-up: tracing, and a second fit's own first-time costs (seen: 3x slower than later)
        model.fit(data(), epochs=1, steps_per_epoch=STEPS_PER_EXECUTION * 2, verbose=0, callbacks=callbacks)
    return model, callbacks


def images_per_second(model: keras.Model, callbacks: list[keras.callbacks.Callback], steps: int) -> float:
    began = time.perf_counter()
    model.fit(data(), epochs=1, steps_per_epoch=steps, verbose=0, callbacks=callbacks)
    return steps * BATCH / (time.perf_counter() - began)


def main(argv: list[str]) -> int:
    rounds = int(argv[0]) if argv else 6
    steps = int(argv[1]) if len(argv) > 1 else 640
    print(f"CPU: {cpu_name()}; TensorFlow {tf.__version__}; {rounds} rounds of {steps} steps, batch {BATCH}, "
          f"steps_per_execution {STEPS_PER_EXECUTION}", flush=True)
    runs = {True: trained(True), False: trained(False)}
    rates: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(rounds):
        for ledger in (True, False):
            rates[ledger].append(images_per_second(*runs[ledger], steps))
    on, off = (statistics.median(rates[flag]) for flag in (True, False))
    for flag, name in ((True, "ledger on "), (False, "ledger off")):
        print(f"{name}: median {statistics.median(rates[flag]):8.0f} images/s; rounds "
              + " ".join(f"{rate:.0f}" for rate in rates[flag]))
    print(f"ratio on/off: {on / off:.3f} (issue 44: at least 0.99)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
