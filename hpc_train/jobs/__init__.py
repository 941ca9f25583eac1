"""The login-node side: what a job asks Slurm for, and the sbatch script that asks it.

Nothing here imports TensorFlow or the trainer: it runs where jobs are submitted.
"""
