"""Many CAS expansions in parallel, each under a hard time limit and a memory limit.

symengine can run for a long time or blow up on a single expression (`exp(b*x)*exp(c*x) - exp(f*x)` to
order 10 took 15 s and returned a 234 MB string), and only a process can be stopped reliably in the middle of
that. So each expansion runs in a forked worker with one task in flight, and a worker still busy after the
time limit is killed and replaced.

Generation is deterministic: candidate expressions come from the caller in order, workers only compute, and
results are consumed in candidate order, so the output does not depend on the number of workers or on
scheduling. The one exception is the time limit itself: an expression close to it may time out on a loaded
machine and not on an idle one; the result lists timeouts and the slowest expression so that a run that came
close can be spotted.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import resource
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from tqdm.auto import tqdm

from ...errors import UsageError
from ...validation import integer_in, number_in
from .expansion import DROP_REASONS, SeriesOutcome, expression_to_series, se
from .grammar import SYMBOL_NAMES
from .sampling import MAX_TERMS, iter_candidates

ProcessFn = Callable[[str, int | None], SeriesOutcome]


def _worker_loop(conn, process: ProcessFn, max_target_chars: int | None, memory_limit_mb: int) -> None:
    """Body of a worker process: compute outcomes for the expressions it is sent, one at a time."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the main process's to handle
    if memory_limit_mb > 0:
        # A limit on address space above what the (forked) process already maps: a blow-up then
        # fails with MemoryError inside this worker instead of taking the machine's memory.
        page_size = os.sysconf("SC_PAGE_SIZE")
        with open("/proc/self/statm") as statm:
            mapped = int(statm.read().split()[0]) * page_size
        limit = mapped + memory_limit_mb * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        index, expression = task
        try:
            outcome = process(expression, max_target_chars)
        except Exception as exc:  # a bug in `process` must not kill the worker
            outcome = SeriesOutcome("error", f"{type(exc).__name__}: {exc}")
        conn.send((index, outcome))


class _Worker:
    """One worker process and its pipe; at most one task in flight, so a hang can be timed."""

    def __init__(self, context, args: tuple):
        self.conn, child_conn = context.Pipe()
        self.process = context.Process(target=_worker_loop, args=(child_conn, *args), daemon=True)
        self.process.start()
        child_conn.close()
        self.index: int | None = None  # candidate index in flight
        self.started = 0.0

    def submit(self, index: int, expression: str) -> None:
        self.conn.send((index, expression))
        self.index, self.started = index, time.monotonic()

    def kill(self) -> None:
        self.process.kill()
        self.process.join()
        self.conn.close()

    def stop(self) -> None:
        try:
            self.conn.send(None)
        except (BrokenPipeError, OSError):
            pass
        self.process.join(timeout=1.0)
        if self.process.is_alive():
            self.kill()
        else:
            self.conn.close()


@dataclass
class GenerationResult:
    """Examples in candidate order and what was dropped on the way (by ``DROP_REASONS``)."""

    examples: list[tuple[str, str]]
    drops: dict[str, int]
    num_candidates: int
    timed_out: list[str] = field(default_factory=list)
    # Wall time (dispatch to result, any outcome) of the slowest expression that finished, to see
    # how close the run came to the time limit.
    slowest: tuple[float, str] = (0.0, "")


class _NoMonitorProgress(tqdm):
    # tqdm's monitor thread would be running while workers are forked; it is not needed here.
    monitor_interval = 0


def validate_positive(name: str, value, allow_zero: bool = False, integer: bool = False) -> None:
    """Refuse `value` of the argument `name` unless it is a number (an int with `integer`) above 0, or at
    least 0 with `allow_zero`: the package's validators (`validation`), as the options check theirs."""
    spec = ">= 0" if allow_zero else (">= 1" if integer else "> 0")
    try:
        (integer_in if integer else number_in)(spec)(value)
    except ValueError as error:
        raise UsageError(f"{name} {error}") from None


class _CandidateQueue:
    """Candidates in, examples out, in candidate order: the bookkeeping of one `generate_examples` call.

    Duplicates (by source string, or by symengine's canonical form: `sin(a*x)*cos(b*x)` equals
    `cos(b*x)*sin(a*x)`) and unparsable candidates are settled here, before any worker sees them.
    """

    def __init__(self, candidates: Iterator[str], num_examples: int, max_candidates: int, bar: tqdm):
        self.candidates = candidates
        self.num_examples = num_examples
        self.max_candidates = max_candidates
        self.bar = bar
        self.seen_text: set[str] = set()
        self.seen_canonical: set = set()
        self.outcomes: dict[int, SeriesOutcome] = {}  # candidate index -> outcome, until `advance` eats it
        self.sources: dict[int, str] = {}
        self.next_index = 0
        self.cursor = 0  # the first candidate whose outcome has not been consumed
        self.examples: list[tuple[str, str]] = []
        self.drops: Counter = Counter({reason: 0 for reason in DROP_REASONS})
        self.timed_out: list[str] = []
        self.slowest = (0.0, "")
        self.exhausted = False

    @property
    def done(self) -> bool:
        return len(self.examples) >= self.num_examples

    def next_task(self) -> tuple[int, str] | None:
        """The next candidate that needs a worker, or None once the candidates run out."""
        for expression in self.candidates:
            index = self.next_index
            self.next_index += 1
            if index >= self.max_candidates:
                raise UsageError(
                    f"Gave up after {self.max_candidates} candidates with {len(self.examples)} of "
                    f"{self.num_examples} examples (drops so far: {dict(self.drops)}). The sampler's space "
                    f"is too small for --num_examples {self.num_examples}, or almost everything is dropped: "
                    "lower --num_examples, or allow more terms or symbols (--max_terms, --symbols). Nothing "
                    "was written."
                )
            self.sources[index] = expression
            try:
                key = se.sympify(expression)
            except Exception as exc:
                self.outcomes[index] = SeriesOutcome("error", f"cannot parse: {exc}")
                continue
            if expression in self.seen_text or key in self.seen_canonical:
                self.outcomes[index] = SeriesOutcome("duplicate", "same source as an earlier candidate")
                continue
            self.seen_text.add(expression)
            self.seen_canonical.add(key)
            return index, expression
        self.exhausted = True
        return None

    def settle(self, index: int, outcome: SeriesOutcome, seconds: float | None = None) -> None:
        """Record a worker's outcome (and how long it took, to report the slowest expression)."""
        self.outcomes[index] = outcome
        if seconds is not None and seconds > self.slowest[0] and index in self.sources:
            self.slowest = (seconds, self.sources[index])

    def advance(self) -> None:
        """Consume outcomes in candidate order; this is what makes the output independent of scheduling."""
        while self.cursor in self.outcomes and not self.done:
            outcome = self.outcomes.pop(self.cursor)
            expression = self.sources.pop(self.cursor)
            if outcome.status == "ok":
                self.examples.append((expression, outcome.text))
                self.bar.update(1)
            else:
                self.drops[outcome.status] += 1
                if outcome.status == "timeout":
                    self.timed_out.append(expression)
            self.cursor += 1
        self.bar.set_postfix({k: v for k, v in self.drops.items() if v}, refresh=False)

    def result(self) -> GenerationResult:
        drops = {reason: self.drops[reason] for reason in DROP_REASONS}
        return GenerationResult(self.examples, drops, self.cursor, self.timed_out, self.slowest)


def generate_examples(
    num_examples: int,
    *,
    seed: int = 0,
    max_terms: int = MAX_TERMS,
    symbols: Sequence[str] = SYMBOL_NAMES,
    num_proc: int = 2,
    timeout: float = 2.0,
    max_target_chars: int | None = 1000,
    memory_limit_mb: int = 2048,
    candidates: Iterable[str] | None = None,
    max_candidates: int | None = None,
    process: ProcessFn = expression_to_series,
    progress: bool = True,
) -> GenerationResult:
    """Compute `num_examples` unique (expression, series) pairs in parallel.

    Candidates come from `iter_candidates(seed, max_terms, symbols)` unless `candidates` is given (then
    generation stops early if they run out). Duplicates are dropped before any work. Each worker handles one
    expression at a time; one that is still busy after `timeout` seconds is killed and replaced, and the
    expression counted as `timeout`. Results are consumed in candidate order, so the examples and the drop
    counts do not depend on `num_proc`.

    `process` computes one outcome (default `expression_to_series`); workers are forked, so it need not be
    picklable (tests pass one that hangs on purpose).
    """
    validate_positive("num_examples", num_examples, integer=True)
    validate_positive("num_proc", num_proc, integer=True)
    se.load()  # before any work, and before the workers fork, so that they inherit it
    validate_positive("timeout", timeout)
    validate_positive("memory_limit_mb", memory_limit_mb, allow_zero=True, integer=True)
    if max_target_chars is not None:
        validate_positive("max_target_chars", max_target_chars, integer=True)
    if max_candidates is None:
        max_candidates = 20 * num_examples + 1000

    bar = _NoMonitorProgress(
        total=num_examples, desc="series", unit="ex", disable=not progress, mininterval=2
    )
    queue = _CandidateQueue(
        iter(candidates) if candidates is not None else iter_candidates(seed, max_terms, symbols),
        num_examples,
        max_candidates,
        bar,
    )
    # Fork: workers start in milliseconds with sympy and symengine already imported, which matters because
    # every timeout costs a new worker (spawn/forkserver would re-import for about a second each).
    context = multiprocessing.get_context("fork")
    worker_args = (process, max_target_chars, memory_limit_mb)
    workers = [_Worker(context, worker_args) for _ in range(num_proc)]
    try:
        while not queue.done:
            for worker in workers:
                if worker.index is None and not queue.exhausted:
                    task = queue.next_task()
                    if task is not None:
                        worker.submit(*task)
            queue.advance()  # duplicates settled by next_task may complete the cursor's run
            busy = [w for w in workers if w.index is not None]
            if not busy or queue.done:
                break
            deadline = min(w.started for w in busy) + timeout
            ready = multiprocessing.connection.wait(
                [w.conn for w in busy], timeout=max(0.0, deadline - time.monotonic())
            )
            for i, worker in enumerate(workers):
                if worker.index is not None:
                    workers[i] = _collect(worker, ready, queue, timeout, context, worker_args)
            queue.advance()
    finally:
        bar.close()
        for worker in workers:
            if worker.index is None:
                worker.stop()
            else:  # busy on a candidate past the last one needed
                worker.kill()
    return queue.result()


def _collect(
    worker: _Worker, ready: list, queue: _CandidateQueue, timeout: float, context, worker_args
) -> _Worker:
    """Take a busy worker's outcome if it has one, or time it out; return the worker to use from now on (a
    fresh one when this one died or was killed)."""
    if worker.conn in ready:
        seconds = time.monotonic() - worker.started
        try:
            index, outcome = worker.conn.recv()
        except (EOFError, OSError):  # the worker died (e.g. killed by the kernel)
            queue.settle(worker.index, SeriesOutcome("error", "worker process died"), seconds)
            worker.kill()
            return _Worker(context, worker_args)
        queue.settle(index, outcome, seconds)
        worker.index = None
        return worker
    if time.monotonic() - worker.started > timeout:
        queue.settle(worker.index, SeriesOutcome("timeout", f"took more than {timeout} s"))
        worker.kill()
        return _Worker(context, worker_args)
    return worker
