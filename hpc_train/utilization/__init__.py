"""Utilization sampled on every node of a job while it runs (docs/utilization.md): each GPU bound to the node's
ranks (NVML) and each rank's CPU share and resident memory, kept in the run folder's `utilization/`; idle GPUs named
while they idle (the job's log, `status`); a timeline per GPU drawn by `report`.

settings (pure: how often, what is idle), nvml (the seam to NVIDIA's binding), procs (a rank's CPU and memory from
/proc), files (where samples are kept), sampler (the node's thread, started by its first rank), idle (pure: idle
GPUs, the status line), watch (the job body's thread that says idle GPUs in the job's log), plot (report's timeline).
"""
