"""`hpc-train train` with each checkpoint save timed: how `hpc-train bench task` measures what saving costs.

The same trainer in the same process, with one change: the saver the trainer
gives its callbacks (StepSaver, called at each epoch's end) is wrapped in a
clock. The save is synchronous (CheckpointManager.save returns when the files
are written and renamed), so the wall-clock time of that call is all it costs
the training loop. Writes the global step and seconds of every save as JSON:

    python -m hpc_train.bench.timed_saves SAVES.json [hpc-train train options...]
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any


def main(argv: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else argv
    saves_path, train_arguments = Path(arguments[0]), arguments[1:]
    # Patched where the trainer hands its saver to the callbacks: trainer.py imports no TensorFlow, so
    # TensorFlow still starts where it would (after the malloc and thread settings), not here.
    from hpc_train.cli import main as cli_main
    from hpc_train.training import trainer

    saves: list[dict[str, Any]] = []
    callbacks = trainer._callbacks

    def timed_callbacks(*args: Any) -> list[Any]:
        *before, save, report = args

        def timed_save() -> str:
            started = time.perf_counter()
            prefix = save()
            saves.append({"step": int(save.model.optimizer.iterations.numpy()),
                          "seconds": time.perf_counter() - started})
            return prefix

        return callbacks(*before, timed_save, report)

    trainer._callbacks = timed_callbacks  # type: ignore[assignment]
    try:
        return cli_main(["train", *train_arguments])
    finally:
        saves_path.write_text(json.dumps({"saves": saves}))


if __name__ == "__main__":
    sys.exit(main())
