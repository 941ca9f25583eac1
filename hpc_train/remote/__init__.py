"""hpc-train from another machine: remotes (a login node reached over OpenSSH) and what runs through them.

`config` reads and writes remotes.yaml, `ssh` builds OpenSSH's and rsync's argv (one multiplexed
connection per remote) and reads their failures, `run` forwards a verb to the login node's own
hpc-train, `transfer` copies a submit's snapshot there and a job's run folders back. This side
needs no Slurm: the login node runs hpc-train itself.
"""
