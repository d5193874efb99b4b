"""One way to stop, for every command: SIGINT (Ctrl-C) and SIGTERM (what SLURM, Kubernetes and the clouds send
before they kill) raise `Stopped` in the command's main thread, wherever it is. It unwinds the command like
an exception: an output being written is left visibly unfinished (`outputs.staged` removes its staging
folder), the locks are released, the worker processes end with it (`end_workers`), and `cli.run_script`
says in one line what was kept and how to go on, then exits with 130 or 143, as a shell reports a command
ended by the signal.

`Stopped` is a `BaseException`, as `KeyboardInterrupt` is: an `except Exception` in a library does not
swallow it. A training run installs its own handlers while it trains (`training.faults.Interruption`: a
checkpoint at the end of the step, then the same ending). This leaf imports nothing of ours.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

SIGNALS = (signal.SIGINT, signal.SIGTERM)
# How long a worker process may take to end once asked, before it is killed.
WORKER_GRACE = 5.0


class Stopped(BaseException):
    """A command stopped by a signal (`signum`)."""

    def __init__(self, signum: int):
        self.signum = signum
        super().__init__(signal.Signals(signum).name)

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def status(self) -> int:
        return 128 + self.signum


_owner: int | None = None
# The stop asked for and not yet ended on: Python swallows an exception raised where it cannot propagate
# (in an at-fork callback, a finalizer; "Exception ignored in ..."), and the command must stop all the same
# (`check`).
_pending: Stopped | None = None


def install() -> dict[int, object]:
    """Make SIGINT and SIGTERM raise `Stopped` in this process's main thread; the handlers they replace,
    for `restore`. A process forked from this one (a worker) ignores SIGINT: a terminal's Ctrl-C reaches the
    whole group, and the parent ends its workers as it stops (a worker that left on its own while it held
    its pool's queue would leave the pool's end waiting for it forever). Told to end (SIGTERM), it leaves at
    once and quietly."""
    global _owner
    if threading.current_thread() is not threading.main_thread():
        return {}  # signals reach the main thread only; a command driven from another thread keeps Python's
    _owner = os.getpid()
    ended()
    return {number: signal.signal(number, _handle) for number in SIGNALS}


def restore(previous: dict[int, object]) -> None:
    for number, handler in previous.items():
        signal.signal(number, handler)


def _handle(number: int, frame) -> None:
    global _pending
    if os.getpid() != _owner:
        if number != signal.SIGINT:
            os._exit(128 + number)
        return
    if _forking or time.monotonic() < _fork_grace_ends:
        # Raised in the callbacks a fork runs (logging's, filelock's), it would be swallowed: sent again once
        # they are done, from a thread, so that the main thread takes it in its own code.
        threading.Timer(0.05, os.kill, (os.getpid(), number)).start()
        return
    _pending = Stopped(number)
    raise _pending


_forking = False
# A library imported after this module (filelock, fsspec, huggingface_hub: the commands import them late)
# registers its fork callbacks after these, and in the parent they run after `_fork_ended`: a stop that comes
# this soon after a fork waits for them too. A stop in the main thread's own code waits as long: unnoticed.
FORK_GRACE_SECONDS = 0.05
_fork_grace_ends = 0.0


def _fork_begins() -> None:
    global _forking
    _forking = True


def _fork_ended() -> None:
    global _forking, _fork_grace_ends
    _forking = False
    _fork_grace_ends = time.monotonic() + FORK_GRACE_SECONDS


# Registered after logging's hooks: `before` runs before theirs, `after_in_parent` after theirs.
os.register_at_fork(before=_fork_begins, after_in_parent=_fork_ended, after_in_child=_fork_ended)


def check() -> None:
    """Raise the stop that was asked for if it was swallowed on its way (see `_pending`): where a command
    is about to publish what it wrote, and when its `main` returns."""
    if _pending is not None:
        raise _pending


def ended() -> None:
    """The stop asked for has been ended on (`cli.run_script`)."""
    global _pending
    _pending = None


def as_stopped(error: BaseException) -> Stopped:
    """A `KeyboardInterrupt` (Python's own SIGINT handler, where `install` was not called) as `Stopped`."""
    return error if isinstance(error, Stopped) else Stopped(signal.SIGINT)


def stop_behind(error: BaseException) -> Stopped | None:
    """The stop that `error` was raised while handling, if any: a library whose clean-up fails as a stop
    unwinds it (`datasets.map` with workers asks each for its result, and times out) replaces the stop with
    its own error."""
    seen = error.__context__
    while seen is not None:
        if isinstance(seen, KeyboardInterrupt | Stopped):
            return as_stopped(seen)
        seen = seen.__context__
    return None


def end_workers() -> None:
    """End the worker processes this process started (multiprocessing's, and `multiprocess`'s, which
    `datasets.map(num_proc=...)` uses): asked first (SIGTERM), killed after `WORKER_GRACE` seconds."""
    pools = [sys.modules.get(name) for name in ("multiprocessing", "multiprocess")]
    children = [child for pool in pools if pool is not None for child in pool.active_children()]
    for child in children:
        child.terminate()
    for child in children:
        child.join(WORKER_GRACE)
        if child.is_alive():
            child.kill()
            child.join()
