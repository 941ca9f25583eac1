"""What a job is, as values: pure (no I/O, no Slurm, no TensorFlow), below every side that reads it.

`sweep` is a sweep's elements and values (a grid or a random search, checked against the settings; a command's
`{KEY}` placeholders substituted). The login side builds them, the job body and a packed sweep's runner read
them back; neither imports the other for them.
"""
