"""Built-in task modules (see hpc_train/training/usertask.py for what a task module defines)."""
