"""The run folders: their owner, on every side of a job.

`folders` lays them out and names them (`runs/NAME-JOBID/`, a sweep's elements `runs/NAME-ARRAYID_I/`,
`job.json`, rank logs); `state` is `state.json`; `attempts` its history of attempts and the notes failing ranks
leave; `metrics` is `metrics.json`, its one reader and writer; `objective` the one rule for what a sweep is
compared by and which way is better; `compare` ranks a sweep's runs for `report`; `views` computes what
`status`, `list`, `report` and the demo show (`columns` aligns their tables). `snapshot` is the code a job runs
(runs/snapshots/), `provenance` what a run folder records of it, and `requeue` the one rule for a run stopped by
the time-limit warning (the trainer's and the job body's). The login side, the job and the trainer read and write
a run folder through this package alone.
"""
