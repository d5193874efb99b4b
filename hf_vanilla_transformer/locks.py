"""One lock per output: a command that writes a file or folder holds `<output>.lock` beside it while it runs,
so that a second command writing the same output (a job submitted twice, a requeue while the first still runs)
is refused in one line naming the holder, before it reads, deletes or writes anything.

The lock is a small JSON file made with `O_CREAT | O_EXCL`, which the local file system and NFS (v3 and
later) make atomically: its holder's command, process id, host, start time and a token. It is removed when
the command ends, whichever way it ends but a kill that leaves no chance (SIGKILL, a machine lost); such a
lock is stale and is taken over, in one line that says so:
- on this host, at once, when its process is gone (or its id now belongs to a process that started later);
- from another host, when it has not been renewed for `STALE_AFTER` seconds: a holder renews it (touches
  the file) every `RENEW_EVERY` seconds from a thread of its own. Another host's process cannot be asked
  whether it lives; a file's time of change, which a shared file system keeps, can be read anywhere.

Under `accelerate launch` one process holds the lock for the run: the first (`RANK` 0); the others write
their parts of checkpoints into a folder it holds. A process that holds a folder's lock holds everything
inside it (the final folder of a run, the report an evaluation writes into a model folder).

What it cannot promise (docs/training.md, "Around a command"): on a shared file system the take-over of a
stale lock from another host relies on clocks that agree within `STALE_AFTER - RENEW_EVERY` seconds, and a
file system that does not make `O_EXCL` atomic (NFS v2, some FUSE mounts) can let two holders in.
Written here because neither torch, transformers nor Accelerate locks an output (`filelock`, which
huggingface_hub uses for its cache, takes `flock`, which does not reach across the hosts of a cluster and
names no holder). This leaf imports nothing of ours but `errors`.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime
import json
import os
import shlex
import socket
import sys
import threading
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from .errors import UserError

LOCK_SUFFIX = ".lock"
RENEW_EVERY = 20.0
STALE_AFTER = 120.0
# A lock file is written in one small write after it is made: one that does not parse yet is being written,
# unless it is older than this.
UNREADABLE_GRACE = 10.0


class OutputLockedError(UserError, FileExistsError):
    """Another command is writing the same output."""


@dataclass
class Holder:
    """Who holds a lock, as its file records it."""

    command: str
    pid: int
    host: str
    started: str  # ISO time, UTC
    token: str
    process_start: str | None = None  # the kernel's start time of `pid` (pid reuse), where it is known

    @classmethod
    def this_process(cls) -> Holder:
        return cls(
            command=command_line(),
            pid=os.getpid(),
            host=socket.gethostname(),
            started=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
            token=uuid.uuid4().hex,
            process_start=process_start(os.getpid()),
        )

    def describe(self) -> str:
        return f"`{self.command}` (process {self.pid} on {self.host}, since {self.started})"


def command_line() -> str:
    """This process's command as a user typed it: `python scripts/train.py ...`."""
    return shlex.join(["python", *sys.argv]) if sys.argv and sys.argv[0] else "python"


def process_start(pid: int) -> str | None:
    """When process `pid` started, in the kernel's clock ticks since boot (Linux), or None: a dead process
    whose id was reused has another."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            # The command name, field 2, may hold spaces and parentheses: count from its closing one.
            return stat.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def process_alive(pid: int, started: str | None) -> bool:
    """Whether process `pid` of this host runs, and is the one that started at `started` (where known)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        pass
    now = process_start(pid)
    return started is None or now is None or now == started


def lock_path(output: str | os.PathLike) -> Path:
    output = Path(os.path.abspath(output))
    return output.with_name(output.name + LOCK_SUFFIX)


def is_main_process() -> bool:
    """Whether this process holds a launch's locks: the first of `accelerate launch` / torchrun, or a process
    that was not launched."""
    return os.environ.get("RANK", "0") == "0"


class OutputLock:
    """The lock of one output (`lock_path`), held by this process from `acquire` to `release`."""

    def __init__(self, output: str | os.PathLike):
        self.output = Path(os.path.abspath(output))
        self.path = lock_path(output)
        self.holder: Holder | None = None
        # The folders made to hold the lock, removed with it if still empty: a command refused after its
        # options were parsed leaves no trace.
        self._made: list[Path] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def acquire(self) -> None:
        """Take the lock, taking over a stale one; refuse (`OutputLockedError`) one that another command
        holds."""
        missing = self.path.parent
        while not missing.exists() and missing != missing.parent:
            self._made.append(missing)
            missing = missing.parent
        self.path.parent.mkdir(parents=True, exist_ok=True)
        holder = Holder.this_process()
        for _ in range(5):  # a take-over raced by another process: look again
            try:
                descriptor = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                self._take_over_or_refuse()
                continue
            with os.fdopen(descriptor, "w", encoding="utf-8") as file:
                file.write(json.dumps(asdict(holder)) + "\n")
                file.flush()
                os.fsync(file.fileno())
            self.holder = holder
            self._thread = threading.Thread(target=self._renew, name=f"lock {self.path.name}", daemon=True)
            self._thread.start()
            return
        raise OutputLockedError(f"{self.output} could not be locked: {self.path} keeps changing hands.")

    def _take_over_or_refuse(self) -> None:
        held = read_holder(self.path)
        why = stale_because(self.path, held)
        if why is None:
            who = held.describe() if held is not None else "a command whose lock file is being written"
            raise OutputLockedError(
                f"{self.output} is being written by {who}: wait for it to end, or stop it. Its lock, "
                f"{self.path}, is taken over once its holder is gone."
            )
        # Renamed away rather than deleted: of two processes that both found it stale, one rename succeeds.
        aside = self.path.with_name(f"{self.path.name}.stale.{socket.gethostname()}.{os.getpid()}")
        try:
            os.rename(self.path, aside)
        except FileNotFoundError:
            return
        aside.unlink(missing_ok=True)
        who = held.describe() if held is not None else "an unreadable holder"
        print(f"Taking over the lock of {self.output} from {who}: {why}.", file=sys.stderr)

    def _renew(self) -> None:
        while not self._stop.wait(RENEW_EVERY):
            try:
                os.utime(self.path)
            except OSError:  # removed under us (a user, a take-over): nothing left to renew
                return

    def release(self) -> None:
        self._stop.set()
        held = read_holder(self.path)
        if self.holder is not None and held is not None and held.token == self.holder.token:
            self.path.unlink(missing_ok=True)
        self.holder = None
        for folder in self._made:  # deepest first
            try:
                folder.rmdir()
            except OSError:  # the command wrote into it, or another made it its own
                break
        self._made = []


def read_holder(path: Path) -> Holder | None:
    """The holder a lock file records, or None where it does not parse (being written, or damaged)."""
    try:
        return Holder(**json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return None


def stale_because(path: Path, held: Holder | None) -> str | None:
    """Why the lock at `path` (held by `held`) may be taken over, or None when its holder may still write."""
    try:
        age = datetime.datetime.now().timestamp() - path.stat().st_mtime
    except FileNotFoundError:
        return "it was released"
    if held is None:
        return f"its file does not parse and is {age:.0f} s old" if age > UNREADABLE_GRACE else None
    if held.host == socket.gethostname():
        if not process_alive(held.pid, held.process_start):
            return "that process has ended"
        return None
    if age > STALE_AFTER:
        return f"it has not been renewed for {age:.0f} s (more than {STALE_AFTER:.0f})"
    return None


# The locks this process holds, by output: released when the command ends (`release_all`, called by
# `cli.run_script` and at exit). Only a command holds its outputs' locks from its options on
# (`command_started`); code calling the library holds one while it writes (`holding`).
_HELD: dict[Path, OutputLock] = {}
_command = False


def command_started() -> None:
    global _command
    _command = True


def hold(output: str | os.PathLike) -> None:
    """Hold the lock of `output` until this command ends; nothing to do where this process holds it, or a
    folder it lies in, already, where another process of a launch holds the launch's (`is_main_process`), or
    outside a command (`command_started`)."""
    if not (_command and is_main_process()):
        return
    output = Path(os.path.abspath(output))
    if any(held == output or held in output.parents for held in _HELD):
        return
    lock = OutputLock(output)
    lock.acquire()
    _HELD[output] = lock


def holds(output: str | os.PathLike) -> bool:
    output = Path(os.path.abspath(output))
    return any(held == output or held in output.parents for held in _HELD)


@contextlib.contextmanager
def holding(output: str | os.PathLike) -> Iterator[None]:
    """Hold the lock of `output` for a block: for the library called from Python, whose process (a notebook)
    may outlive the write by hours. Nothing to do where this process holds it already (a command holds its
    outputs' from its options on: `hold`)."""
    if holds(output) or not is_main_process():
        yield
        return
    lock = OutputLock(output)
    lock.acquire()
    try:
        yield
    finally:
        lock.release()


def release_all() -> None:
    global _command
    _command = False
    while _HELD:
        _, lock = _HELD.popitem()
        lock.release()


atexit.register(release_all)
