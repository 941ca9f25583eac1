"""`hpc-train doctor`: a cluster checked before anyone waits in its queue.

`checks` runs on the login node (Slurm, partitions, accounting, GPUs, and the
judging of the test step's reports); `step` is what each rank of the test step
runs on a compute node (`python -m hpc_train.doctor.step`).
"""
