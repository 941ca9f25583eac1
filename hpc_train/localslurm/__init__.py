"""A real Slurm on one Linux machine: munged, slurmctld and N slurmd "nodes", all in a private directory.

`spec` renders the configuration (pure); `control` starts, checks and stops the
daemons, `accounting` adds slurmdbd and a MariaDB of its own, `netns` gives each
node a host of its own; `daemons` holds what they share. A system Slurm, if any, is left alone: everything lives under the
cluster's directory and is reached through its own SLURM_CONF.
"""
