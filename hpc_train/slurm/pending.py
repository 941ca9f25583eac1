"""Why a job is pending, in words: Slurm's reason codes (`scontrol show job`'s Reason, squeue's %r) explained.

Some reasons pass (Resources, Priority); some never do by themselves
(PartitionConfig, a limit of the partition): those say what to do.
"""

from __future__ import annotations

# Slurm's reason code -> what it means for the user, and what to do when waiting will not help.
REASONS = {
    "Resources": "waiting for nodes to come free",
    "Priority": "other jobs are ahead of it in the queue",
    "None": "about to be scheduled",
    "BeginTime": "its start time (--begin) has not come yet",
    "Dependency": "waiting for a job it depends on",
    "DependencyNeverSatisfied": "a job it depends on failed: it will never start; cancel it (hpc-train cancel)",
    "JobHeldUser": "held by you: it starts after scontrol release JOBID",
    "JobHeldAdmin": "held by an administrator: ask them to release it",
    "PartitionConfig": "the request does not fit the partition's configuration (nodes, GPUs, CPUs): it will never "
                       "start; cancel it and ask for less",
    "PartitionNodeLimit": "more nodes than the partition allows per job: it will never start; cancel it and ask "
                          "for fewer nodes",
    "PartitionTimeLimit": "more time than the partition allows: it will never start; cancel it and ask for a "
                          "shorter --time",
    "PartitionDown": "the partition is down: it starts when an administrator brings it up",
    "PartitionInactive": "the partition is inactive: it starts when an administrator activates it",
    "ReqNodeNotAvail": "a node it needs is down, drained or reserved",
    "NodeDown": "a node it needs is down",
    "BadConstraints": "its constraints (--constraint, GPUs, memory) match no node: it will never start; cancel it "
                      "and change them",
    "InvalidAccount": "the account is not valid: cancel it and submit with a valid --account",
    "InvalidQOS": "the QOS is not valid: cancel it and submit with a valid --qos",
    "QOSMaxJobsPerUserLimit": "you have as many running jobs as your QOS allows: it starts when one ends",
    "AssocMaxJobsLimit": "your account runs as many jobs as it may: it starts when one ends",
    "Reservation": "waiting for its reservation to start",
    "launch failed requeued held": "its launch failed and Slurm held it: see the log, then scontrol release JOBID",
}


def reason_in_words(reason: str, job_id: str = "JOBID") -> str:
    """'Resources: waiting for nodes to come free'; an unknown code as Slurm gives it. `job_id`: the job's, in
    what to do (scontrol release 1234), so that it can be pasted as it is."""
    code = reason.strip().strip("()")
    meaning = REASONS.get(code, "").replace("JOBID", job_id) or None
    if meaning is None and code.startswith(("QOS", "Assoc")):
        meaning = "a limit of your QOS or account: it starts when the limit allows (sacctmgr show assoc)"
    return f"{code}: {meaning}" if meaning else code
