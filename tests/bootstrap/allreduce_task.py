"""One task of a two-task MultiWorkerMirroredStrategy all-reduce; prints what it saw.

Run as `python allreduce_task.py tf_config` under `hpc-train bootstrap` (the
strategy reads TF_CONFIG) or as `python allreduce_task.py resolver PORT_BASE`
(the strategy takes our ClusterResolver, no TF_CONFIG).
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

mode = sys.argv[1]
if mode == "resolver":
    from hpc_train.bootstrap import BootstrapOptions
    from hpc_train.bootstrap.resolver import LayoutClusterResolver

    resolver = LayoutClusterResolver.from_environment(options=BootstrapOptions(port_base=int(sys.argv[2])))
    strategy = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)
else:
    assert "TF_CONFIG" in os.environ
    strategy = tf.distribute.MultiWorkerMirroredStrategy()

rank = int(os.environ["SLURM_PROCID"])
per_replica = strategy.run(lambda: tf.constant(float(rank + 1)))
total = strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)
print(json.dumps({"rank": rank, "sum": float(total), "replicas": strategy.num_replicas_in_sync,
                  "chief": strategy.extended.should_checkpoint}))
