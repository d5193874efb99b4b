"""Run Python as a user runs it, `python scripts/NAME.py ARGS` or `python -c CODE ARGS`, in a process of its
own, without paying the interpreter's imports for every run.

Importing torch and transformers is most of the 3-5 s that a fresh interpreter running a script takes on this
machine's 2 cores, and the suite starts dozens of them. So these processes are children forked from one
`multiprocessing` fork server per test process, which imported the libraries once (tests/fork_preload.py), but
not this package. Each child gets its own `sys.argv`, `sys.path[0]`, working directory, environment, stdin
(/dev/null), stdout and stderr, and runs the script or code as `__main__`; its exit status is the script's,
and an uncaught exception prints its traceback and exits 1, as in a fresh interpreter.

What a child cannot reproduce is what happens while those libraries are imported: warnings printed at import
time, and environment variables read only then (the Hub's offline switches, OpenMP's `OMP_NUM_THREADS`). A
test that asserts on those runs a fresh interpreter (`subprocess`); the README's snippets and the quickstart
do. These functions refuse an environment that changes a variable read at import time, except
`OMP_NUM_THREADS`, which they apply with `torch.set_num_threads`.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.forkserver
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"

# Environment variables that the preloaded libraries read when imported: a child cannot change them.
IMPORT_TIME_PREFIXES = ("HF_HUB_", "HF_HOME", "HF_DATASETS_", "HF_EVALUATE_", "HF_ENDPOINT")
IMPORT_TIME_PREFIXES += ("HF_MODULES_CACHE", "HUGGINGFACE_", "TRANSFORMERS_", "USE_TORCH", "XDG_CACHE_HOME")
IMPORT_TIME_PREFIXES += ("TORCH", "PYTORCH_", "OMP_", "GOMP_", "MKL_", "KMP_", "PYTHON")
THREADS = "OMP_NUM_THREADS"  # the one of them a child applies itself

_context = None
_server_environment: dict[str, str] = {}


def _fork_server():
    global _context
    if _context is None:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["tests.fork_preload"])
        # The server imports the preload module from its working directory, whatever sys.path says.
        with contextlib.chdir(ROOT):
            multiprocessing.forkserver.ensure_running()
        _server_environment.update(os.environ)
        _context = context
    return _context


def _child(
    kind: str, target: str, args: list[str], cwd: str, env: dict[str, str], out: str, err: str
) -> None:
    import atexit
    import builtins
    import runpy
    import threading
    import traceback
    import types

    code = 1
    try:
        # First the streams, so that whatever fails after this is reported in the child's stderr.
        for fd, path, flags in ((0, os.devnull, os.O_RDONLY), (1, out, os.O_WRONLY), (2, err, os.O_WRONLY)):
            opened = os.open(path, flags)
            os.dup2(opened, fd)
            os.close(opened)
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 - fd 0, left open for the script
        try:
            # A fresh interpreter's view of multiprocessing: the main process, with the default start method.
            current = multiprocessing.current_process()
            current._name, current._parent_pid, current._parent_name = "MainProcess", None, None
            multiprocessing.process._parent_process = None
            multiprocessing.set_start_method(None, force=True)
            os.chdir(cwd)
            os.environ.clear()
            os.environ.update(env)
            if THREADS in env:
                import torch

                torch.set_num_threads(int(env[THREADS]))
            if kind == "script":
                sys.argv = [target, *args]
                sys.path[0] = str(Path(target).parent)
                runpy.run_path(target, run_name="__main__")
            else:
                sys.argv = ["-c", *args]
                sys.path[0] = ""
                main = types.ModuleType("__main__")
                main.__builtins__ = builtins
                sys.modules["__main__"] = main
                exec(compile(target, "<string>", "exec"), main.__dict__)
            code = 0
        except SystemExit as exit_:
            if exit_.code is None or isinstance(exit_.code, int):
                code = exit_.code or 0
            else:
                print(exit_.code, file=sys.stderr)
                code = 1
        except BaseException:
            traceback.print_exc()
            code = 1
        threading._shutdown()  # as an interpreter does at exit: wait for threads, then atexit
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 - a closed stream must not hide the exit status
                pass
        os._exit(code)


def _run(kind: str, target: str, args, cwd: Path, env: dict | None, timeout: float):
    if not Path(cwd).is_dir():
        raise FileNotFoundError(f"No working directory {cwd}")
    context = _fork_server()
    extra = {key: str(value) for key, value in (env or {}).items()}
    # Only what the caller asks for: libraries set variables of these names at run time too (torch.compile).
    changed = sorted(
        key
        for key, value in extra.items()
        if key.startswith(IMPORT_TIME_PREFIXES) and key != THREADS and _server_environment.get(key) != value
    )
    if changed:
        raise ValueError(f"{', '.join(changed)} take effect only in a fresh interpreter: use subprocess")
    argv = [str(arg) for arg in args]
    command = [sys.executable, *([target] if kind == "script" else ["-c", target]), *argv]
    with tempfile.TemporaryDirectory() as folder:
        out, err = Path(folder) / "stdout", Path(folder) / "stderr"
        out.touch()
        err.touch()
        process = context.Process(
            target=_child, args=(kind, target, argv, str(cwd), {**os.environ, **extra}, str(out), str(err))
        )
        process.start()
        process.join(timeout)
        if process.exitcode is None:
            process.kill()
            process.join()
            raise subprocess.TimeoutExpired(
                command, timeout, out.read_text(errors="replace"), err.read_text(errors="replace")
            )
        return subprocess.CompletedProcess(
            command, process.exitcode, out.read_text(errors="replace"), err.read_text(errors="replace")
        )


def run_script_file(
    script: str | Path, *args: str | Path, cwd: Path, env: dict | None = None, timeout: float = 600
) -> subprocess.CompletedProcess:
    """`python scripts/<script> args...` (or an absolute path) in `cwd`, with `env` added to this process's
    environment; returns what `subprocess.run(..., capture_output=True, text=True)` would."""
    path = Path(script) if Path(script).is_absolute() else SCRIPTS / script
    return _run("script", str(path), args, cwd, env, timeout)


def run_code(
    code: str, *args: str | Path, cwd: Path, env: dict | None = None, timeout: float = 600
) -> subprocess.CompletedProcess:
    """`python -c code args...` in `cwd`, as `run_script_file` runs a script."""
    return _run("code", code, args, cwd, env, timeout)
