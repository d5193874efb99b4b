"""The test helper that runs scripts as a user does (tests/script_runner.py) reports what a fresh interpreter
would: output, logging and warnings, exit status, tracebacks, arguments, working directory, environment; and
what a script changes in the test's process is put back."""

import logging
import os
import warnings
from pathlib import Path

import pytest
import torch

from .script_runner import run_code, run_script_file

SCRIPT = """
import logging, os, sys, warnings
print("out", sys.argv[1:], os.getcwd(), os.environ.get("GREETING"), __name__)
print("err", file=sys.stderr)
logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
logging.getLogger("script").info("logged")
logging.getLogger("transformers").warning("from a library")
warnings.warn("careful")
os.environ["LEFT_BEHIND"] = "1"
sys.exit(int(sys.argv[1]))
"""


def test_a_script_gets_its_arguments_directory_and_environment_and_its_exit_status_is_kept(tmp_path):
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    (tmp_path / "work").mkdir()
    before = (os.getcwd(), logging.getLogger().handlers[:], warnings.filters[:], torch.get_num_threads())
    result = run_script_file(script, "3", "x y", cwd=tmp_path / "work", env={"GREETING": "hello"})
    assert result.returncode == 3
    assert result.stdout == f"out ['3', 'x y'] {tmp_path / 'work'} hello __main__\n"
    lines = result.stderr.splitlines()
    assert lines[0] == "err" and "INFO logged" in lines
    assert any(line.endswith("from a library") for line in lines)  # a library's own handler, redirected
    assert any(line.endswith("UserWarning: careful") for line in lines)
    assert run_script_file(script, "0", cwd=tmp_path).returncode == 0
    after = (os.getcwd(), logging.getLogger().handlers[:], warnings.filters[:], torch.get_num_threads())
    assert after == before and "LEFT_BEHIND" not in os.environ and "GREETING" not in os.environ


def test_an_uncaught_exception_prints_its_traceback_and_exits_1(tmp_path):
    script = tmp_path / "boom.py"
    script.write_text("import sys\nprint(sys.argv[1:])\nraise KeyError('boom')\n")
    for result in (
        run_script_file(script, "a", cwd=tmp_path),
        run_code(script.read_text(), "a", cwd=tmp_path),
    ):
        assert result.returncode == 1 and result.stdout == "['a']\n"
        assert "Traceback (most recent call last)" in result.stderr and "KeyError: 'boom'" in result.stderr
    script.write_text("raise SystemExit('error: a message')\n")
    assert run_script_file(script, cwd=tmp_path).stderr == "error: a message\n"
    message = run_code(script.read_text(), cwd=tmp_path)
    assert message.returncode == 1 and message.stderr == "error: a message\n"


def test_a_variable_read_only_at_import_needs_a_fresh_interpreter(tmp_path):
    script = tmp_path / "threads.py"
    script.write_text("import torch\nprint(torch.get_num_threads())\n")
    with pytest.raises(
        ValueError, match="HF_HUB_OFFLINE take effect only in a fresh interpreter: use run_code"
    ):
        run_script_file(script, cwd=tmp_path, env={"HF_HUB_OFFLINE": "0"})
    fresh = run_code(
        "import os; print(os.environ['HF_HUB_OFFLINE'])", cwd=tmp_path, env={"HF_HUB_OFFLINE": "0"}
    )
    assert fresh.stdout == "0\n"
    assert run_script_file(script, cwd=tmp_path, env={"OMP_NUM_THREADS": "1"}).stdout == "1\n"


def test_the_installed_tasks_outlive_a_script_that_read_them_first(tmp_path):
    """In a process whose first reader of the task registry is a script run here, the installed tasks are
    still known after it (a test file run after such a test relies on them)."""
    root = Path(__file__).resolve().parents[1]
    code = (
        "import sys; sys.path[:0] = [sys.argv[1], sys.argv[1] + '/scripts']\n"
        "from tests.script_runner import run_script_file\n"
        "from hf_vanilla_transformer.tasks import registry\n"
        "assert not registry._entry_points_read\n"
        "run_script_file('train_tokenizer.py', '--help', cwd=sys.argv[2])\n"
        "print(sorted({'series', 'translation'} & set(registry.registered_tasks())))"
    )
    result = run_code(code, root, tmp_path, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "['series', 'translation']"
