"""Symbolic comparison of a predicted series with its reference, under a per-pair time limit.

Two pieces live here:

* `series_equivalent` / `series_terms`: the sympy work on series parsed by the grammar's `parse_series`.
* `EquivalenceChecker`: runs that work in a separate interpreter (this file run as a script) and kills it
  when one pair takes longer than the time limit. sympy can run for minutes on a single pair (`simplify` on a
  large quotient), and only a process can be stopped reliably in the middle of that.

Why a fresh interpreter rather than `multiprocessing`: `fork` copies a parent that may hold torch/OpenMP
threads, and `spawn` re-imports the caller's `__main__` (a training script) in the child. Run as a script,
this file imports only sympy, the standard library and `grammar.py` beside it (not this package, which would
import torch and transformers), so the worker is ready in about half a second.
"""

from __future__ import annotations

import contextlib
import json
import logging
import queue
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

import sympy

if __package__:
    from ...errors import UsageError
    from ...validation import number_in
    from .grammar import SERIES_NAMES, SeriesParseError, parse_series
else:  # the worker process: this file run as a script, its folder first on sys.path, without the package
    from grammar import SERIES_NAMES, SeriesParseError, parse_series

    UsageError = ValueError

logger = logging.getLogger(__name__)

# A point with distinct, small, non-integer coordinates: unlikely to be a pole or a root of anything in the
# data, and exact, so a non-zero value there proves two series differ.
_SAMPLE_POINT = {
    sympy.Symbol(name): sympy.Rational(numerator, denominator)
    for name, numerator, denominator in zip(
        sorted(SERIES_NAMES), (3, 5, 7, 11, 13, 17, 19), (7, 11, 13, 17, 19, 23, 29), strict=True
    )
}


def series_equivalent(prediction: sympy.Expr, reference: sympy.Expr) -> bool:
    """Whether two parsed series (`parse_series`, which leaves out the `O(...)` term) are equal.

    The answer is "equivalent" only if ``prediction - reference`` simplifies to 0. Exact
    evaluation at one rational point first rejects most wrong predictions cheaply (a non-zero
    value there proves the difference is not identically zero), so the expensive ``simplify``
    mostly runs on pairs that are in fact equal.
    """
    difference = prediction - reference
    if difference == 0:
        return True
    value = difference.subs(_SAMPLE_POINT)
    if value.is_finite and value.is_zero is False:
        return False
    return sympy.expand(difference) == 0 or sympy.simplify(difference) == 0


def series_terms(expression: sympy.Expr) -> frozenset[sympy.Expr]:
    """The monomials of a parsed series, coefficients left out, once it is expanded:
    `x*(a*c/g + 2*a) + 1 + O(x**6)` has the terms {1, a*x, a*c*x/g}. Two series with the same
    terms differ, if at all, only in their rational coefficients (signs included).

    >>> sorted(series_terms(parse_series("1 + x*(a*c/g + 2*a) + O(x**6)")), key=str)
    [1, a*c*x/g, a*x]
    """
    coefficients = sympy.expand(expression).as_coefficients_dict()
    return frozenset(monomial for monomial, coefficient in coefficients.items() if coefficient != 0)


@dataclass(frozen=True)
class PairResult:
    """Outcome of comparing one prediction with its reference.

    Attributes:
        parsed: the prediction parsed (``False`` if the time ran out while parsing it).
        equivalent: the prediction was shown equal to the reference within the time limit.
        same_terms: the prediction has the reference's terms (see :func:`series_terms`), whatever their
            coefficients; true whenever ``equivalent`` is.
        timed_out: the time limit was hit, or the worker died on this pair.
    """

    parsed: bool
    equivalent: bool
    same_terms: bool
    timed_out: bool


_WORKER_EXITED = object()  # queue sentinel: the worker's stdout reached end of file


class EquivalenceChecker:
    """Compare series pairs in a worker process, at most ``timeout`` seconds per pair.

    A pair that exceeds the limit counts as not equivalent; the worker is killed and a fresh
    one started for the next pair. Use as a context manager so the worker is always stopped::

        with EquivalenceChecker(timeout=5.0) as checker:
            result = checker.check("x + O(x**6)", "x + O(x**6)")

    Args:
        timeout: seconds allowed per pair, for parsing both sides and comparing them.
        startup_timeout: seconds allowed for a worker to start (importing sympy); not part of
            any pair's budget, so that a slow start on a loaded machine is not a timeout.
    """

    def __init__(self, timeout: float = 5.0, startup_timeout: float = 120.0):
        try:
            number_in("> 0")(timeout)
        except ValueError as error:
            raise UsageError(f"timeout (seconds) {error}") from None
        self.timeout = timeout
        self.startup_timeout = startup_timeout
        self._process: subprocess.Popen | None = None
        self._messages: queue.Queue = queue.Queue()

    def __enter__(self) -> EquivalenceChecker:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def check(self, prediction: str, reference: str) -> PairResult:
        """Parse both strings and compare them in the worker.

        Raises:
            ValueError: the reference does not parse (a data error, not a model error).
        """
        request = json.dumps([prediction, reference]) + "\n"
        if self._process is None or self._process.poll() is not None:
            self._start()
        try:
            self._send(request)
        except OSError:  # the worker died after the previous pair (BrokenPipeError): start over
            self._start()
            self._send(request)

        # The worker answers twice per pair: once parsed, once compared. Both share one budget.
        deadline = time.monotonic() + self.timeout
        parse_reply = self._receive(deadline)
        if parse_reply is None:
            self._stop_worker(kill=True)
            return PairResult(parsed=False, equivalent=False, same_terms=False, timed_out=True)
        verdict = self._receive(deadline)
        if verdict is None:
            self._stop_worker(kill=True)
            return PairResult(
                parsed=parse_reply["parsed"], equivalent=False, same_terms=False, timed_out=True
            )
        if "reference_error" in verdict:
            raise ValueError(verdict["reference_error"])
        return PairResult(
            parsed=parse_reply["parsed"],
            equivalent=verdict["equivalent"],
            same_terms=verdict["same_terms"],
            timed_out=False,
        )

    def close(self) -> None:
        """Stop the worker, if one is running."""
        self._stop_worker(kill=False)

    def _start(self) -> None:
        self._stop_worker(kill=True)
        # stderr is inherited, so a worker traceback shows up in the caller's output.
        self._process = subprocess.Popen(
            [sys.executable, __file__],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )
        # A reader thread turns the blocking pipe into a queue with a timed get(), which works
        # on every platform (select() on pipes does not work on Windows).
        self._messages = queue.Queue()
        threading.Thread(target=_pump_lines, args=(self._process.stdout, self._messages), daemon=True).start()
        if self._receive(time.monotonic() + self.startup_timeout) is None:
            self._stop_worker(kill=True)
            raise RuntimeError(
                f"the sympy worker ({sys.executable} {__file__}) did not start within "
                f"{self.startup_timeout} s; see its error output above"
            )

    def _send(self, request: str) -> None:
        self._process.stdin.write(request)
        self._process.stdin.flush()

    def _receive(self, deadline: float) -> dict | None:
        """Next message from the worker, or ``None`` if the deadline passed or the worker died."""
        try:
            message = self._messages.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            return None
        if message is _WORKER_EXITED:
            logger.warning("the sympy worker exited unexpectedly; see its error output above")
            return None
        return message

    def _stop_worker(self, kill: bool) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        if kill:
            process.kill()
        with contextlib.suppress(OSError):  # closing also flushes, which fails if the worker died
            process.stdin.close()  # end of input: the worker loop returns
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        # process.stdout belongs to the reader thread, which closes it at end of file.


def _pump_lines(stream, messages: queue.Queue) -> None:
    """Reader thread: forward each JSON line from the worker, then the end-of-file sentinel."""
    with stream:
        try:
            for line in stream:
                messages.put(json.loads(line))
        except (ValueError, OSError):  # garbage on the pipe, or a broken pipe
            pass
    messages.put(_WORKER_EXITED)


def _worker_main() -> None:
    """Worker loop: read ``[prediction, reference]`` JSON lines, answer with JSON lines."""
    channel = sys.stdout
    # Anything that prints (a sympy warning, a stray print) must not corrupt the protocol.
    sys.stdout = sys.stderr

    def send(**message) -> None:
        channel.write(json.dumps(message) + "\n")
        channel.flush()

    send(ready=True)
    for line in sys.stdin:
        prediction_text, reference_text = json.loads(line)
        try:
            prediction = parse_series(prediction_text)
        except SeriesParseError:
            prediction = None
        send(parsed=prediction is not None)
        try:
            reference = parse_series(reference_text)
        except SeriesParseError as err:
            send(reference_error=f"the reference is not a valid series: {err}")
            continue
        if prediction is None:
            send(equivalent=False, same_terms=False)
            continue
        try:
            equivalent = series_equivalent(prediction, reference)
        except Exception:  # sympy failing on an odd but parsable prediction: not shown equivalent
            equivalent = False
        try:
            same_terms = equivalent or series_terms(prediction) == series_terms(reference)
        except Exception:  # as above: an odd prediction is not credited with the right terms
            same_terms = False
        send(equivalent=equivalent, same_terms=same_terms)


if __name__ == "__main__":
    _worker_main()
