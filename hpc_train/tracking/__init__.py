"""Runs in an experiment tracker (MLflow): one tracked run per job, whatever its ranks, requeues and retries.

`settings` is pure (what to track where, the parameters, which epochs are new, the status a job ended with);
`mlflow_run` talks to MLflow (create or resume the job's run, log, close), imported only where a job asked for
it; `logger` is the thread beside the step that logs each epoch as metrics.json gains it; `sync` uploads a run
folder whole, later (`hpc-train track sync ID`). The job body (injob/body.py) owns the run: it is made before the
ranks start, so every rank of a user's command joins it through MLFLOW_RUN_ID, and no rank ever waits on it.
"""
