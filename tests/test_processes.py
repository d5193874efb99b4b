"""The test helper that runs scripts as a user does (tests/processes.py) reports what a fresh interpreter
would: output, exit status, tracebacks, arguments, working directory, environment."""

import pytest

from .processes import run_code, run_script_file

SCRIPT = """
import os, sys
print("out", sys.argv[1:], os.getcwd(), os.environ.get("GREETING"), __name__)
print("err", file=sys.stderr)
sys.exit(int(sys.argv[1]))
"""


def test_a_script_gets_its_arguments_directory_and_environment_and_its_exit_status_is_kept(tmp_path):
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    (tmp_path / "work").mkdir()
    result = run_script_file(script, "3", "x y", cwd=tmp_path / "work", env={"GREETING": "hello"})
    assert result.returncode == 3
    assert result.stdout == f"out ['3', 'x y'] {tmp_path / 'work'} hello __main__\n"
    assert result.stderr == "err\n"
    assert run_script_file(script, "0", cwd=tmp_path).returncode == 0


def test_an_uncaught_exception_prints_its_traceback_and_exits_1(tmp_path):
    result = run_code("import sys\nprint(sys.argv[1:])\nraise KeyError('boom')", "a", cwd=tmp_path)
    assert result.returncode == 1 and result.stdout == "['a']\n"
    assert "Traceback (most recent call last)" in result.stderr and "KeyError: 'boom'" in result.stderr
    message = run_code("raise SystemExit('error: a message')", cwd=tmp_path)
    assert message.returncode == 1 and message.stderr == "error: a message\n"


def test_a_child_starts_from_the_preloaded_libraries_without_the_package_as_a_main_process(tmp_path):
    code = """
import multiprocessing, sys
print("transformers" in sys.modules, "hf_vanilla_transformer" in sys.modules)
print(multiprocessing.current_process().name, multiprocessing.parent_process())
"""
    assert run_code(code, cwd=tmp_path).stdout == "True False\nMainProcess None\n"


def test_a_variable_read_only_at_import_is_refused(tmp_path):
    with pytest.raises(ValueError, match="HF_HUB_OFFLINE take effect only in a fresh interpreter"):
        run_code("pass", cwd=tmp_path, env={"HF_HUB_OFFLINE": "0"})
    code = "import torch; print(torch.get_num_threads())"
    threads = run_code(code, cwd=tmp_path, env={"OMP_NUM_THREADS": "1"})
    assert threads.stdout == "1\n"
