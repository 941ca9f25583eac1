"""The exit codes a rank and its job agree on, in one place: what the trainer, a supervised command, the mock
launcher and the job scripts read from one another."""

# hpc-train refused its input (a bad option, config or task module): running it again would fail the same way.
EXIT_REFUSED = 2
# Checkpointed and stopped (EX_TEMPFAIL): not finished, run it again to go on. A warned job requeues itself.
EXIT_STOPPED = 75
# TensorFlow's PreemptionCheckpointHandler, off Google Cloud, exits with 42 after saving on SIGTERM: the same ask.
EXIT_TF_PREEMPTION = 42
# A rank lost contact with a peer that died or froze (EX_UNAVAILABLE): the job may go on after a retry without it.
EXIT_LOST_PEER = 69
# The prologue's "the job ends here": its retries are spent (any other failure of the prologue changes nothing).
EXIT_RETRIES_SPENT = 3
