"""The run folders: their owner, on every side of a job.

`folders` lays them out (`runs/NAME-JOBID/`, `job.json`, rank logs); `state` is `state.json`; `attempts` its
history of attempts and the notes failing ranks leave; `compare` ranks a sweep's runs for `report`. The login
side, the job and the trainer read and write a run folder through this package alone.
"""
