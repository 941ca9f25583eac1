"""Built-in task modules, each whole in its folder (`mnist/`: data, fetch, model, pipeline); see
hpc_train/training/usertask.py for what a task module defines."""
