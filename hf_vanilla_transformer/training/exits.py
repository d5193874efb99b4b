"""How a training script's process ends: `end_process` after training, `leave_finished_run` when a resumed
run had nothing left to do, and `leave_launched_process`, the end of one process of a several-process launch
(docs/training.md, "Several processes")."""

from __future__ import annotations

import atexit
import os
import sys

from accelerate import Accelerator


def end_process(accelerator: Accelerator, status: int = 0) -> None:
    """The last step of a training script's process: wait for the others, release the model and its engine,
    take down the process group, and under `accelerate launch` on several processes leave with `status`
    (`leave_launched_process`); a single process exits with `status` if it is not 0. Call it only where
    nothing is left to run."""
    several = accelerator.num_processes > 1
    accelerator.wait_for_everyone()
    accelerator.free_memory()
    accelerator.end_training()
    if several:
        leave_launched_process(status)
    if status:
        raise SystemExit(status)


def leave_finished_run(finished: Exception, main_process: bool, num_processes: int) -> None:
    """The end of a script that resumed a finished run (`RunFinished`: a requeued job): the main process says
    so, and every process ends with status 0, since nothing was left to do and nothing was done."""
    if main_process:
        print(finished)
    if num_processes > 1:
        leave_launched_process(0)


def leave_launched_process(status: int = 0) -> None:
    """End one process of a several-process launch, its work done: run the exit handlers, flush, and end
    without the interpreter's finalization, in which gloo's threads can abort a finished process
    (docs/training.md, "Several processes")."""
    atexit._run_exitfuncs()  # what a normal exit runs (logging's shutdown among them); no public name
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
