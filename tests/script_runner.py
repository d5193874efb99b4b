"""Run a script as a user runs it, `python scripts/NAME.py ARGS` (`run_script_file`), or code that needs an
interpreter of its own, `python -c CODE ARGS` (`run_code`).

A script runs in the test's own process, as transformers' example tests run theirs: its `__main__` is
executed with its `sys.argv`, working directory and added environment; what it prints, logs and warns is
captured as its stdout and stderr; its exit status comes from `SystemExit`, and an uncaught exception prints
its traceback and gives status 1, as in a fresh interpreter. What the script changes in the process is put
back afterwards: the working directory, the environment, the task registry, logging's handlers and levels,
the warning filters, torch's thread count.

What cannot be seen in-process is what happens while the libraries are imported (they are imported already),
environment variables read only then, and code that must run where this package cannot be imported: those
tests use `run_code`, a fresh interpreter (`subprocess`).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import runpy
import subprocess
import sys
import traceback
import warnings
from pathlib import Path

import pytest
import torch

from hf_vanilla_transformer.tasks import registry

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"

# Environment variables that the libraries read when imported: in-process, a script cannot change them.
IMPORT_TIME_PREFIXES = ("HF_HUB_", "HF_HOME", "HF_DATASETS_", "HF_ENDPOINT")
IMPORT_TIME_PREFIXES += ("HF_MODULES_CACHE", "HUGGINGFACE_", "TRANSFORMERS_", "USE_TORCH", "XDG_CACHE_HOME")
IMPORT_TIME_PREFIXES += ("TORCH", "PYTORCH_", "OMP_", "GOMP_", "MKL_", "KMP_", "PYTHON")
THREADS = "OMP_NUM_THREADS"  # the one of them applied here, with torch.set_num_threads


def _show_warning(message, category, filename, lineno, file=None, line=None):
    # As an interpreter prints a warning: to the stderr of the moment, here the script's.
    sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


@contextlib.contextmanager
def _as_a_fresh_process(cwd: Path, env: dict[str, str], stdout: io.StringIO, stderr: io.StringIO):
    """What the script sees and changes, set with pytest's `MonkeyPatch` and undone by it: the working
    directory, the variables given, `sys.argv` and `sys.path`, the task registry, logging, the warning
    filters; what the script
    sets in the environment itself and torch's thread count are put back here."""
    saved_environ, saved_threads = dict(os.environ), torch.get_num_threads()
    loggers = [
        logger for logger in logging.root.manager.loggerDict.values() if isinstance(logger, logging.Logger)
    ]
    with (
        pytest.MonkeyPatch.context() as patch,
        contextlib.redirect_stdout(stdout),
        contextlib.redirect_stderr(stderr),
        warnings.catch_warnings(),
    ):
        patch.chdir(cwd)
        for key, value in env.items():
            patch.setenv(key, value)
        patch.setattr(sys, "argv", list(sys.argv))
        patch.setattr(sys, "path", list(sys.path))
        # The tasks a fresh process knows: the installed ones, and those the test itself imported; a task file
        # the script imports is forgotten with it. The installed ones are read before the registry is saved:
        # read first inside, they would be forgotten with the script while their modules stay imported, and a
        # module imported already does not register its task again.
        registry.registered_tasks()
        for name in ("_TASKS", "_FILES", "_BROKEN"):
            patch.setattr(registry, name, dict(getattr(registry, name)))
        patch.setattr(registry, "_entry_points_read", registry._entry_points_read)
        if THREADS in env:
            torch.set_num_threads(int(env[THREADS]))
        # Logging as a fresh interpreter has it: no root handler (the script's basicConfig takes effect), and
        # the libraries' own handlers (transformers', datasets') writing to the script's stderr.
        root = logging.getLogger()
        patch.setattr(root, "handlers", [])
        patch.setattr(root, "level", logging.WARNING)
        for logger in loggers:
            patch.setattr(logger, "handlers", list(logger.handlers))
            patch.setattr(logger, "level", logger.level)
            patch.setattr(logger, "disabled", logger.disabled)
            for handler in logger.handlers:
                if type(handler) is logging.StreamHandler:
                    patch.setattr(handler, "stream", stderr)
        # A fresh interpreter's warning filters, and warnings printed rather than collected by pytest.
        warnings.resetwarnings()
        warnings.filterwarnings("default", category=DeprecationWarning, module="__main__")
        for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
            warnings.filterwarnings("ignore", category=category)
        warnings.showwarning = _show_warning
        try:
            yield
        finally:
            torch.set_num_threads(saved_threads)
            os.environ.clear()
            os.environ.update(saved_environ)


def run_script_file(
    script: str | Path, *args: str | Path, cwd: Path, env: dict | None = None
) -> subprocess.CompletedProcess:
    """`python scripts/<script> args...` (or an absolute path) in `cwd`, with `env` added to the environment,
    run in this process (see the module docstring); returns what `subprocess.run(..., capture_output=True,
    text=True)` would."""
    path = Path(script) if Path(script).is_absolute() else SCRIPTS / script
    if not Path(cwd).is_dir():
        raise FileNotFoundError(f"No working directory {cwd}")
    extra = {key: str(value) for key, value in (env or {}).items()}
    changed = sorted(
        key
        for key, value in extra.items()
        if key.startswith(IMPORT_TIME_PREFIXES) and key != THREADS and os.environ.get(key) != value
    )
    if changed:
        raise ValueError(f"{', '.join(changed)} take effect only in a fresh interpreter: use run_code")
    argv = [str(path), *map(str, args)]
    stdout, stderr = io.StringIO(), io.StringIO()
    code = 0
    with _as_a_fresh_process(Path(cwd), extra, stdout, stderr):
        sys.argv[:] = argv
        sys.path[0] = str(path.parent)
        try:
            runpy.run_path(str(path), run_name="__main__")
        except SystemExit as exit_:
            if exit_.code is None or isinstance(exit_.code, int):
                code = exit_.code or 0
            else:
                print(exit_.code, file=sys.stderr)
                code = 1
        except Exception:  # noqa: BLE001 - reported as an interpreter reports it
            traceback.print_exc()
            code = 1
    return subprocess.CompletedProcess([sys.executable, *argv], code, stdout.getvalue(), stderr.getvalue())


def run_code(
    code: str, *args: str | Path, cwd: Path, env: dict | None = None, timeout: float = 600
) -> subprocess.CompletedProcess:
    """`python -c code args...` in `cwd`, in a fresh interpreter, with `env` added to this environment."""
    return subprocess.run(
        [sys.executable, "-c", code, *map(str, args)],
        cwd=cwd,
        env={**os.environ, **{key: str(value) for key, value in (env or {}).items()}},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
