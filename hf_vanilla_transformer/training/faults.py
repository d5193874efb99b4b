"""What long runs meet, and how a run ends on each: an interrupt or a preemption notice (SIGINT, SIGTERM)
saves a checkpoint at the step reached and stops; a launcher that dies takes its workers with it; a process
of a launch that stops answering ends the run, named; a full disk is said to be one. How each is tested is in
docs/training.md, "Faults and resuming".
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import logging
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from transformers import TrainerCallback

from ..errors import UserError

logger = logging.getLogger(__name__)


class DiskFullError(UserError, OSError):
    """The disk a run writes to filled up: the user frees space and resumes."""


class Interruption:
    """SIGINT (Ctrl-C) and SIGTERM (what SLURM, Kubernetes and the clouds send before they kill) as a request
    to stop. Before training there is nothing to save: the process stops at once. While training, the first
    asks for a checkpoint at the end of the step and a stop (`FaultsCallback`), a second leaves at once. After
    training the final folder is being saved: the run finishes it."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)
    BEFORE, TRAINING, AFTER = "before", "training", "after"

    def __init__(self):
        self.received: int | None = None  # the first signal that came, here or (`FaultsCallback`) to a peer
        # When this process got its own first signal: a peer's request that stopped training is not the user
        # asking this process twice.
        self.signalled_at: float | None = None
        self.stopped = False  # training stopped on the request: every process agreed, after the same step
        self.phase = self.BEFORE
        self._pid = os.getpid()
        self._previous: dict[int, object] = {}

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # signals reach the main thread only; a run driven from another thread keeps Python's
        for number in self.SIGNALS:
            self._previous[number] = signal.signal(number, self._handle)

    def restore(self) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)
        self._previous.clear()

    @property
    def exit_status(self) -> int:
        return 128 + (self.received or 0)  # as a shell reports a process ended by the signal

    def _handle(self, number, frame) -> None:
        if os.getpid() != self._pid:
            return  # a data-loader worker, forked with the handler: its process leaves when told to
        name = signal.Signals(number).name
        if self.phase == self.BEFORE:
            _say(f"{name}: stopping before training started; nothing to save.")
            raise SystemExit(128 + number)
        if self.signalled_at is None:
            self.signalled_at = time.monotonic()
            self.received = self.received or number
            again = f"({name} again: leave now)"
            if self.phase == self.TRAINING:
                _say(f"{name}: saving a checkpoint at the end of this step, then stopping {again}")
            else:
                _say(f"{name}: training is over; finishing the final folder {again}")
        # SLURM signals every process of a job step, and a launcher passes on what it gets: a repeat within a
        # second is the same request, not the user asking again.
        elif time.monotonic() - self.signalled_at >= 1.0:
            _say(f"{name} again: leaving now, without saving.")
            os._exit(128 + number)


def _say(line: str) -> None:
    # From a signal handler: `print` may re-enter a stream the interrupted code was writing to.
    os.write(2, f"\n{line}\n".encode())


def stopped_message(name: str, step: int, checkpoint: Path | None) -> str:
    """What a run stopped by a signal says last (`checkpoint` None: nothing was saved)."""
    if checkpoint is None:
        return f"Stopped by {name} at step {step}; nothing saved."
    return (
        f"Stopped by {name} at step {step}, saved in {checkpoint}: --resume_from_checkpoint true continues."
    )


class FaultsCallback(TrainerCallback):
    """Turns an `Interruption` into a checkpoint at the step reached and the end of training, and has the
    `Watchdog` watch the other processes while training runs. Every process stops after the same step: the
    request is shared by `agreement` (a `StepAgreement`, read together every few steps), so that one
    process's signal stops them all, and only what they agreed on decides what happens next."""

    def __init__(self, interruption: Interruption, watchdog: Watchdog, agreement):
        self.interruption = interruption
        self.watchdog = watchdog
        self.agreement = agreement

    def on_train_begin(self, args, state, control, **kwargs):
        self.interruption.phase = Interruption.TRAINING
        self.watchdog.watch_peers()

    def on_step_end(self, args, state, control, **kwargs):
        if not self.agreement.after_step(state.global_step):
            return
        if self.interruption.received is None:  # another process's signal
            self.interruption.received = signal.SIGTERM
        self.interruption.stopped = True
        control.should_training_stop = True
        control.should_log = True  # the loss up to the step reached, which the checkpoint holds
        control.should_save = args.save_strategy != "no"
        # A preemption's grace is seconds and an evaluation can take minutes: the evaluation due at this step
        # is not made, then or after resuming.
        control.should_evaluate = False

    def on_save(self, args, state, control, **kwargs):
        if self.interruption.stopped:
            # Its record is saved; kept, the Trainer would load the best model at the end, and with
            # save_total_limit 1 delete the checkpoint just saved.
            state.best_model_checkpoint = None

    def on_train_end(self, args, state, control, **kwargs):
        self.interruption.phase = Interruption.AFTER
        self.watchdog.stop()


def launched() -> bool:
    """Whether this process is a worker of torchrun (`accelerate launch` on several processes)."""
    return "TORCHELASTIC_RUN_ID" in os.environ


class Watchdog:
    """A thread in each worker of a launch. It stops the worker when its launcher is gone (a killed
    `accelerate launch` leaves orphans that train on, unseen), and ends the run when another process has not
    answered for `stall_timeout` seconds (a frozen or lost process otherwise leaves the others waiting in
    their next collective for `ddp_timeout`, 30 minutes by default), naming it. Each process counts up a
    heartbeat in a key-value store of the run's own (torch's `TCPStore`, served by process 0) and reads the
    others'. Written here because neither torch nor Accelerate watches for these on gloo."""

    INTERVAL = 2.0
    STORE_TIMEOUT = 5.0  # one read of the store; a frozen process 0 (its server) answers none
    MIN_STALL_TIMEOUT = 10.0  # below an interval and a read of the store, a live process would be named

    def __init__(self, stall_timeout: float, grace: float = 60.0):
        self.stall_timeout = stall_timeout
        self.grace = grace  # after asking the worker to stop, how long before it is ended
        # Only a launcher's worker: a process started by a shell with nohup outlives that shell by design.
        self.launcher = os.getppid() if launched() else None
        self.store = None
        self.rank = int(os.environ.get("RANK", "0"))
        self.world_size = int(os.environ.get("WORLD_SIZE", "1"))
        self.last_change: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Watch the launcher from now on (a worker orphaned while it reads its data stops too)."""
        if self.launcher is not None:
            self._start_thread()

    def watch_peers(self) -> None:
        """Watch the other processes too; every process of the run calls it (it sets up the store)."""
        import torch.distributed as dist

        if not (self.stall_timeout and dist.is_available() and dist.is_initialized()):
            return
        if dist.get_world_size() < 2:
            return
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        host = os.environ.get("MASTER_ADDR", "127.0.0.1")
        timeout = datetime.timedelta(seconds=self.STORE_TIMEOUT)
        port, store = [None], None
        if self.rank == 0:
            try:
                store = dist.TCPStore(host, 0, is_master=True, wait_for_workers=False, timeout=timeout)
                port = [store.port]
            except (RuntimeError, OSError) as error:
                logger.warning(
                    "No watch over the processes (--stall_timeout): no store on %s (%s).", host, error
                )
        dist.broadcast_object_list(port, src=0)  # every process, whether the store came up or not
        if port[0] is None:
            return
        if self.rank != 0:
            try:
                store = dist.TCPStore(host, port[0], is_master=False, timeout=timeout)
            except (RuntimeError, OSError) as error:
                logger.warning(
                    "No watch over the processes (--stall_timeout): %s:%s (%s).", host, port[0], error
                )
                return
        now = time.monotonic()
        self.last_change = {rank: now for rank in range(self.world_size) if rank != self.rank}
        self.store = store
        self._start_thread()

    def stop(self) -> None:
        self._stop.set()

    def _start_thread(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._watch, name="watchdog", daemon=True)
            self._thread.start()

    def _watch(self) -> None:
        counts: dict[int, int] = {}
        while not self._stop.wait(self.INTERVAL):
            if self.launcher is not None and os.getppid() != self.launcher:
                self._launcher_gone()
                return
            if self.store is not None:
                self._check_peers(counts)

    def _check_peers(self, counts: dict[int, int]) -> None:
        now = time.monotonic()
        try:
            self.store.add(f"heartbeat/{self.rank}", 1)
            for rank in self.last_change:
                count = self.store.add(f"heartbeat/{rank}", 0)
                if count != counts.get(rank):
                    counts[rank], self.last_change[rank] = count, now
        except (RuntimeError, OSError):  # torch's DistStoreError: process 0, its server, does not answer
            pass
        for rank, changed in self.last_change.items():
            if now - changed > self.stall_timeout:
                self._stalled(rank)

    def _launcher_gone(self) -> None:
        logger.error(
            "The launcher (process %d) is gone: stopping this process (rank %d).", self.launcher, self.rank
        )
        os.kill(os.getpid(), signal.SIGTERM)  # as a preemption: a checkpoint at the end of the step
        if self._stop.wait(self.grace):
            return
        os._exit(128 + signal.SIGTERM)

    def _stalled(self, rank: int) -> None:
        print(
            f"error: process {rank} of {self.world_size} has not answered for {self.stall_timeout:g} s "
            "(stopped, frozen, or its machine lost): ending the run. Resume with --resume_from_checkpoint "
            "true; --stall_timeout sets the wait.",
            file=sys.stderr,
            flush=True,
        )
        os._exit(1)


def is_disk_full(error: BaseException, folder: str | Path, margin: int = 64 * 2**20) -> bool:
    """Whether `error`, raised while writing into `folder`, comes from a full disk (or a full quota): an
    `OSError` with ENOSPC or EDQUOT anywhere in its chain, or torch's writer failing ("unexpected pos", "file
    write failed") while less than `margin` bytes are left there."""
    seen = error
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        seen = seen.__cause__ or seen.__context__
    writer_failed = any(words in str(error) for words in ("unexpected pos", "file write failed"))
    return isinstance(error, RuntimeError) and writer_failed and _free_bytes(folder) < margin


def _free_bytes(folder: str | Path) -> int:
    folder = Path(folder)
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return shutil.disk_usage(folder).free


def disk_full_error(folder: str | Path, error: BaseException) -> DiskFullError:
    """The one line a full disk gets: the folder, the space left and what to do."""
    cause = (str(error).splitlines() or [""])[0][:200]
    return DiskFullError(
        f"No space left on device while writing to {folder} ({_free_bytes(folder) / 2**20:.0f} MiB free): "
        "free some space (or keep fewer checkpoints, --save_total_limit), then resume with "
        f"--resume_from_checkpoint true, which takes the newest whole checkpoint ({type(error).__name__}: "
        f"{cause})",
    )


@contextlib.contextmanager
def naming_a_full_disk(folder: str | Path) -> Iterator[None]:
    """A full disk while training writes into `folder` is said in one line (torch's writer says "unexpected
    pos"), not in a traceback."""
    try:
        yield
    except (OSError, RuntimeError) as error:
        if is_disk_full(error, folder):
            raise disk_full_error(folder, error) from error
        raise
