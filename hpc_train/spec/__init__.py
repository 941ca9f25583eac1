"""What a job is, as values: pure (no I/O, no Slurm, no TensorFlow), below every side that reads it.

`options` builds the request once from the options the command line hands over (the YAML's `job:` under them):
`request` (JobRequest: its groups, `noderange`, `pack`'s share, `sbatchoptions`, `data_service`), whose `#SBATCH`
lines are `directives`'; `jobline` is the job body's one line; `sweep` and `search` a sweep's elements and values (a
grid, a random or an adaptive search; a command's `{KEY}` substituted). The login side builds them, the job body and
a packed sweep's runner read them back; neither imports the other for them.
"""
