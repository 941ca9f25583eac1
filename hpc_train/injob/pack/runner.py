"""`hpc-train pack --run-dir DIR`: a packed sweep's job body. It runs the sweep's trials inside the one allocation,
each as its own srun step (`--exact`, on its share's node(s), `--gres=gpu:K`: Slurm gives each step its own GPUs),
and starts the next trial as soon as one ends; the scheduling itself is core.py's (pure).

Each trial is a sweep element as a job array's is: its run folder `runs/NAME-JOBID_I/` (config.yaml with its values,
job.json, logs/rank-R.out, checkpoints, metrics.json), its values as HPC_TRAIN_SWEEP_<KEY>, its index as
HPC_TRAIN_TRIAL; a search's trial is asked of the study as the trial starts (injob/trial.py), and told its end.
A trial that fails is retried on another share (its node avoided) up to max_retries; a node lost under the job (it
asks --no-kill) ends only the trials on it, which restart on the shares left without spending a retry, and its
shares are offered no more (lost.py); `cancel JOBID_I` ends it alone (a file in its folder: runs/packed.py). On the
time-limit warning every running trial is told (srun passes USR1 on), no new one starts, and once they stopped the
job is requeued; the requeued job resumes them first. Each rank's TMPDIR: bootstrap/tmpdir.py's, its task epilog.
A node the pack will not use again (core.to_release) is given back to Slurm at once (release.py); a requeued job
comes back at its full size (Slurm's own doing).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import shlex
import signal
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hpc_train.bootstrap.tmpdir import EPILOG_FILE
from hpc_train.exitcodes import EXIT_STOPPED, EXIT_TF_PREEMPTION
from hpc_train.injob.pack import release
from hpc_train.injob.pack.core import (CANCELLED, DONE, NODE_LOST, PRUNED, PackState, Start, as_json, cancel_waiting,
                                       end_words, ended, from_json, nodes_lost, nodes_released, on_lost_node,
                                       release_refused, slots_of, starts, to_release, worth_a_retry)
from hpc_train.injob.ledgered import after_the_attempt, ledgered_trial, trial_ended
from hpc_train.injob.pack.folders import prepare_trial, record_pack, trial_folder
from hpc_train.injob.pack.lost import failed_node, lost_nodes
from hpc_train.runs import packed
from hpc_train.slurm.client import SlurmClient
from hpc_train.version import PREFIX

POLL_SECONDS = 0.5
# How often the pack asks Slurm whether a node of the job was lost (lost.py), and how long a lost trial's srun has
# to end once told before it is killed.
LOST_CHECK_SECONDS = 10.0
LOST_GRACE_SECONDS = 10.0
# Rank 0 of a trial's step notes where Slurm put it (node and GPUs), for status; then the rank command runs.
_NOTE_GPUS = ('if [ "${SLURM_PROCID:-0}" = 0 ]; then printf "%s %s\\n" "${SLURMD_NODENAME:-?}" '
              '"${SLURM_STEP_GPUS:-${CUDA_VISIBLE_DEVICES:-}}" > "$0"; fi; exec "$@"')


def srun_arguments(plan: Mapping[str, Any], start: Start, folder: Path, rank_command: Sequence[str],
                   options: Sequence[str] = ()) -> list[str]:
    """One trial's step: only its share (--exact, its nodes, its GPUs per node), its ranks' logs in its folder;
    `options`: srun's own, before the command (Pyxis's --container-*) (pure)."""
    share = plan["share"]
    nodes = len(start.slot.nodes)
    return ["--exact", f"--nodes={nodes}", f"--ntasks={nodes * share['tasks']}",
            f"--ntasks-per-node={share['tasks']}", f"--nodelist={','.join(start.slot.nodes)}",
            *((f"--gres=gpu:{share['gpus']}",) if share["gpus"] else ()),
            *((f"--cpus-per-task={share['cpus']}",) if share.get("cpus") else ()),
            "--kill-on-bad-exit=1", "--open-mode=append", f"--output={folder / 'logs' / 'rank-%t.out'}",
            f"--task-epilog={folder.resolve() / EPILOG_FILE}",  # each rank's own TMPDIR gone, however it ended
            *options, "bash", "-c", _NOTE_GPUS, str(folder / packed.STEP_GPUS), *rank_command]


def in_image(plan: Mapping[str, Any], run_dir: Path, folder: Path, rank_command: Sequence[str],
             env: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """(srun's own options, the ranks' command) of a trial: in the pack's image when it has one, as a job's ranks
    are (injob/contained.py), its folder and the sweep's (the study) mounted."""
    if not plan.get("container"):
        return [], list(rank_command)
    from hpc_train.container.runtime import Container
    from hpc_train.injob.contained import container_step

    return container_step(Container(**plan["container"]), folder, rank_command, env, also=(run_dir,))


def rank_command(plan: Mapping[str, Any], folder: Path, values: Mapping[str, Any]) -> list[str]:
    """What every rank of the trial runs: the trainer on its config.yaml, or the user's command, `{KEY}` replaced,
    under the bootstrap (supervised) (pure)."""
    program = [sys.executable, "-u", "-m", "hpc_train"]
    if plan.get("command") is None:
        return [*program, "train", "--config", str(folder / "config.yaml"), "--output-dir", str(folder)]
    from hpc_train.injob.supervisor import CommandJob, supervised_arguments
    from hpc_train.spec.sweep import substitute

    job = CommandJob(tuple(substitute(plan["command"], values)), plan["strategy"], plan["num_ps"],
                     plan["max_requeues"], plan["keras"], plan["command_signal"])
    return [*program, *supervised_arguments(job)]


def trial_env(env: Mapping[str, str], plan: Mapping[str, Any], start: Start, folder: Path,
              values: Mapping[str, Any], job_id: int, slots: int) -> dict[str, str]:
    """The step's environment: the trial's folder, index and values, and ports apart from its neighbours' (pure)."""
    from hpc_train.bootstrap.ports import trial_port_base
    from hpc_train.bootstrap.slurm_env import PORT_BASE
    from hpc_train.spec.sweep import value_text

    share = plan["share"]
    base = trial_port_base(job_id, start.slot.index, slots, len(start.slot.nodes) * share["tasks"])
    from hpc_train.runs.requeue import PACKED

    return {**env, "HPC_TRAIN_RUN_DIR": str(folder.resolve()), "HPC_TRAIN_TRIAL": str(start.index), PACKED: "1",
            PORT_BASE: str(base), **{f"HPC_TRAIN_SWEEP_{key.upper()}": value_text(value)
                                     for key, value in values.items()}}


class Pack:
    """The running pack: the scheduler's state, each running trial's srun, and what the job was told."""

    def __init__(self, run_dir: Path, plan: Mapping[str, Any], env: Mapping[str, str]) -> None:
        import hostlist

        self.run_dir, self.plan, self.env = run_dir, plan, dict(env)  # (a release changes what later steps see)
        share = plan["share"]
        self.hosts = tuple(hostlist.expand_hostlist(env["SLURM_JOB_NODELIST"]))
        self.batch_host = release.batch_host(env, self.hosts)
        slots = slots_of(self.hosts, share["nodes"], share["per_node"])
        saved = packed.read_pack_state(run_dir)
        self.state = from_json(saved, slots) if saved.get("trials") else PackState.new(
            slots, len(plan["trials"]), plan.get("max_parallel"), int(plan.get("max_retries") or 0))
        self.steps: dict[int, Any] = {}
        self.watchdogs: dict[int, Any] = {}  # each running trial's hang watchdog (injob/watchdog.py), alone
        self.trackings: dict[int, Any] = {}  # each running trial's MLflow run (a child of the sweep's), when tracked
        self.warned = False  # the time-limit warning came: no new trial starts, the job requeues once all stopped
        self.terminated = False  # the job is being cancelled
        self.checked_nodes = time.monotonic()
        self.ending: dict[int, float] = {}  # trials on a lost node told to end: when their srun is killed
        self.failed_nodes: queue.SimpleQueue[str] = queue.SimpleQueue()  # srun's "Node failure on X", as it comes
        self.readers: dict[int, threading.Thread] = {}  # each step's reader of srun's lines (pass_on)
        self.failed_steps: set[int] = set()  # trials whose srun said a node of theirs failed (it may then exit 0)

    def say(self, line: str) -> None:
        print(f"{PREFIX}: {line}", file=sys.stderr, flush=True)

    def save(self) -> None:
        packed.write_pack_state(self.run_dir, as_json(self.state))

    def launch(self, start: Start) -> None:
        folder = trial_folder(self.run_dir, self.plan, start.index)
        try:
            values = prepare_trial(self.run_dir, self.plan, start.index, self.env)
            env = trial_env(self.env, self.plan, start, folder, values, int(self.env.get("SLURM_JOB_ID") or 0),
                            len(self.state.slots))
            options, command = in_image(self.plan, self.run_dir, folder, rank_command(self.plan, folder, values), env)
        except Exception as error:  # (its study, its config, its image: this trial cannot run; the others go on)
            self.say(f"trial {start.index} could not start ({type(error).__name__}: {error})")
            self.state = ended(self.state, start.index, 1, time.time(), "failed")
            return
        env |= self.track(start.index, folder, env) | ledgered_trial(folder, start, self.plan["share"], self.env)
        step = SlurmClient.local(env).stream_step(srun_arguments(self.plan, start, folder, command, options))
        self.readers[start.index] = threading.Thread(target=self.pass_on, args=(start.index, step), daemon=True)
        self.readers[start.index].start()
        self.steps[start.index] = step
        self.watchdogs[start.index] = self.watch(folder, start.attempt, step)
        shown = ", ".join(f"{key}={value}" for key, value in values.items())
        self.say(f"trial {start.index} (attempt {start.attempt}) started on {','.join(start.slot.nodes)} "
                 f"(share {start.slot.index}){': ' + shown if shown else ''}; logs in {folder}/logs/")

    def track(self, index: int, folder: Path, env: Mapping[str, str]) -> dict[str, str]:
        """The trial's MLflow run opened, as an array element's is (tracking/job.py: a child of the sweep's run,
        found again by a retried or resumed attempt); the variables for its ranks. A failure is one warning line."""
        if self.plan.get("track") != "mlflow":
            return {}
        try:
            from hpc_train.tracking.job import JobTracking

            tracking = JobTracking.for_job(folder, self.plan.get("tracking_uri"), self.plan.get("experiment"), env,
                                           lambda line: self.say(f"trial {index}: {line.removeprefix(PREFIX + ': ')}"))
            variables = tracking.start()
        except Exception as error:  # noqa: BLE001 - tracking must never stop a trial
            self.say(f"trial {index}: warning: MLflow tracking failed ({type(error).__name__}: {error})")
            return {}
        self.trackings[index] = tracking
        return variables

    def watch(self, folder: Path, attempt: int, step: Any) -> Any:
        """The trial's hang watchdog, as a job's (watchdog.py): no beat for its threshold, its ranks' stacks, then
        its step ended (SIGTERM: srun ends its tasks); it fails, and is retried as a crash is."""
        from hpc_train.injob.watchdog import Watch, Watchdog

        watch = Watch(folder, self.plan.get("hang_minutes"), self.plan.get("command") is not None, attempt)
        def end() -> None:
            if step.poll() is None:
                step.send_signal(signal.SIGTERM)

        def say(line: str) -> None:
            self.say(f"trial {folder.name}: {line.removeprefix(PREFIX + ': ')}")

        return Watchdog(watch, end, say=say).start()

    def poll(self) -> None:
        """Reap every step that ended; end those whose cancel was asked, and those on a lost node."""
        if not (self.warned or self.terminated) and (not self.failed_nodes.empty()
                                                     or time.monotonic() - self.checked_nodes >= LOST_CHECK_SECONDS):
            self.note_lost_nodes()
        self.end_lost_trials()
        for index, step in list(self.steps.items()):
            folder = trial_folder(self.run_dir, self.plan, index)
            cancelled = packed.cancel_requested(folder)
            if cancelled and step.poll() is None:
                step.send_signal(signal.SIGTERM)  # srun ends its step's tasks
                continue
            code = step.poll()
            if code is None:
                continue
            del self.steps[index]
            self.watchdogs.pop(index).stop()
            self.readers.pop(index).join(timeout=5)  # srun's last lines read: whether it said a node failed
            if (code != 0 or index in self.failed_steps) and not (cancelled or self.warned or self.terminated):
                self.note_lost_nodes()
            self.finish(index, 128 - code if code < 0 else code, cancelled)
            self.ending.pop(index, None)
            self.failed_steps.discard(index)
        for trial in self.state.trials:
            if packed.cancel_requested(trial_folder(self.run_dir, self.plan, trial.index)):
                self.state = cancel_waiting(self.state, trial.index)

    def pass_on(self, index: int, step: Any) -> None:
        """srun's own lines (its ranks' go to their logs) passed on to the job's log as they come, its node failures
        noted for the loop (poll)."""
        for raw in iter(step.stdout.readline, b""):
            line = raw.decode(errors="replace")
            sys.stderr.write(line)
            sys.stderr.flush()
            if node := failed_node(line):
                self.failed_steps.add(index)
                self.failed_nodes.put(node)

    def note_lost_nodes(self) -> None:
        """The allocation's nodes that were lost (lost.py): their shares are offered no more, and the trials that
        ran there restart elsewhere (finish)."""
        self.checked_nodes = time.monotonic()
        said = []
        while not self.failed_nodes.empty():
            said.append(self.failed_nodes.get())
        ours = {node for slot in self.state.slots for node in slot.nodes} - set(self.state.gone)  # (given back: no loss)
        new = sorted(lost_nodes(self.env, ours, said) - set(self.state.lost))
        if new:
            self.state = nodes_lost(self.state, new)
            left = len(self.state.usable_slots())
            self.say(f"node(s) {','.join(new)} lost: the trials on them restart on the {left} share(s) left; no trial "
                     "starts there again in this job")

    def end_lost_trials(self) -> None:
        """Each running trial on a lost node: its srun told to end (SIGTERM), then killed after the grace."""
        for index, step in self.steps.items():
            if not on_lost_node(self.state, index) or step.poll() is not None:
                continue
            if index not in self.ending:
                self.ending[index] = time.monotonic() + LOST_GRACE_SECONDS
                step.send_signal(signal.SIGTERM)
            elif time.monotonic() > self.ending[index]:
                step.kill()

    def finish(self, index: int, code: int, cancelled: bool) -> None:
        from hpc_train.injob.trial import settle_trial
        from hpc_train.runs.attempts import record_end
        from hpc_train.runs.state import read_state

        folder = trial_folder(self.run_dir, self.plan, index)
        how = CANCELLED if cancelled or self.terminated else (
            PRUNED if read_state(folder).get("state") == "pruned" else
            "requeued" if self.warned and code in (EXIT_STOPPED, EXIT_TF_PREEMPTION) else
            NODE_LOST if on_lost_node(self.state, index) and (code != 0 or index in {*self.ending, *self.failed_steps})
            else None)
        trial, command = self.state.trials[index], self.plan.get("command") is not None
        worth = worth_a_retry(code, command, self.plan.get("retry_exit_codes") or ())
        self.state = ended(self.state, index, code, time.time(), how, packed.step_gpus(folder).partition(" ")[2], worth)
        after = self.state.trials[index]
        goes_on = after.state == "waiting"
        run = after.runs[-1] if after.runs else {}
        trial_ended(folder, trial.attempts, self.env)  # its ranks' end (the goodput ledger's)
        record_end(folder, trial.attempts, ",".join(run.get("nodes") or []), run.get("started") or time.time(), code,
                   goes_on, finished=command and code == 0)
        after_the_attempt(folder, self.env)
        settle_trial(folder, code, goes_on)
        tracking = self.trackings.pop(index, None)
        if tracking is not None:  # its end: FINISHED, FAILED or KILLED; left open while the trial goes on
            try:
                tracking.finish(code, 0 if goes_on else code or 0)
            except Exception as error:  # noqa: BLE001
                self.say(f"trial {index}: warning: ending its MLflow run failed ({type(error).__name__}: {error})")
        self.say(f"trial {index}: {end_words(trial, after, how, code, self.state.max_retries, worth, command)}")

    def run(self) -> int:
        previous = {signum: signal.signal(signum, self.signalled)
                    for signum in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGTERM)}
        try:
            while True:
                if not (self.warned or self.terminated or self.state.finished):
                    self.give_back()
                if not (self.warned or self.terminated):
                    self.state, launched = starts(self.state, time.time())
                    for start in launched:
                        self.launch(start)
                self.save()
                if not self.steps and (self.state.finished or self.warned or self.terminated):
                    break
                if not self.steps and self.state.stranded:
                    self.say("no share is left to run the waiting trials on: every node of the job was lost")
                    break
                time.sleep(POLL_SECONDS)
                self.poll()
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        if self.terminated:  # the whole pack cancelled (`cancel JOBID`): the trials that never started never will
            for trial in self.state.trials:
                self.state = cancel_waiting(self.state, trial.index)
        self.save()
        return self.end()

    def give_back(self) -> None:
        """The nodes the pack will not use again given back to Slurm, each said in one line (and in status); a
        release Slurm refuses is one line, and the pack holds those nodes to its end."""
        nodes = to_release(self.state, self.hosts, self.batch_host)
        if not nodes:
            return
        problem, self.env = release.give_back(self.env, nodes, self.hosts)
        if problem is not None:
            self.state = release_refused(self.state, nodes)
            self.say(f"could not give {','.join(nodes)} back to Slurm ({problem}); the pack holds "
                     f"{'it' if len(nodes) == 1 else 'them'} to its end")
            return
        self.state = nodes_released(self.state, nodes, time.time())
        for line in packed.released_lines(as_json(self.state))[-len(nodes):]:
            self.say(line)
        self.save()

    def signalled(self, signum: int, frame: Any) -> None:
        """The warning (USR1/USR2) or a cancel (TERM): passed on to every running step."""
        if signum == signal.SIGTERM:
            self.terminated = True
        else:
            self.warned = True
        for step in self.steps.values():
            try:
                step.send_signal(signum)
            except ProcessLookupError:
                pass

    def end(self) -> int:
        """The job's exit code: 0 once every trial ended well (done, pruned or cancelled) or the job is requeued."""
        if self.warned and not self.state.finished:
            from hpc_train.runs.requeue import plan_requeue

            waiting = [trial for trial in self.state.trials if trial.state == "waiting"]
            resumed = sum(1 for trial in waiting if trial.requeues)
            plan = plan_requeue({**self.env, "HPC_TRAIN_PACKED": ""}, int(self.plan.get("max_requeues") or 0))
            after = f"{resumed} trial(s) resume from their checkpoints, {len(waiting) - resumed} start after"
            if plan.job_id is None:
                self.say(f"the time limit is near: not requeued ({plan.reason}); {after}")
                return 1
            # Said before Slurm is asked: its yes ends this process at once (SIGTERM, then SIGKILL after KillWait).
            self.say(f"the time limit is near: requeueing job {plan.job_id}; {after}")
            problem = SlurmClient.local(self.env).requeue(plan.job_id)
            if problem is not None:
                self.say(f"the time limit is near: not requeued ({problem}); {after}")
            return 0 if problem is None else 1
        states = [trial.state for trial in self.state.trials]
        self.say(f"pack {self.env.get('SLURM_JOB_ID', '?')} ended: " + ", ".join(
            f"{states.count(state)} {state}" for state in dict.fromkeys(states)))
        return 0 if all(state in (DONE, PRUNED, CANCELLED) for state in states) else 1


def main(argv: Sequence[str] | None = None) -> int:
    """`hpc-train pack --run-dir DIR` (hidden: a packed sweep's batch script runs it)."""
    parser = argparse.ArgumentParser(prog="hpc-train pack", add_help=False)
    parser.add_argument("--run-dir", type=Path, required=True)
    try:
        args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    except SystemExit:
        return 2
    plan = packed.read_plan(args.run_dir)
    if not plan.get("trials") or "SLURM_JOB_NODELIST" not in os.environ:
        print(f"{PREFIX}: pack: {args.run_dir / packed.PLAN} and a Slurm allocation are needed (the packed sweep's "
              "batch script runs this)", file=sys.stderr)
        return 2
    record_pack(args.run_dir, plan, os.environ)
    pack = Pack(args.run_dir, plan, os.environ)
    share, slots = plan["share"], len(pack.state.slots)
    at_once = min(slots, plan.get("max_parallel") or slots)
    pack.say(f"pack {os.environ.get('SLURM_JOB_ID', '?')} on {os.environ['SLURM_JOB_NODELIST']}: "
             f"{len(plan['trials'])} trials, {at_once} at once ({share['gpus']} GPU(s) x {share['nodes']} node(s) "
             f"each); logs and results in {shlex.quote(str(args.run_dir))}_I/")
    return pack.run()
