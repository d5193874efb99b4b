"""What happens around a command while it runs, case by case as users met it: a second copy of it, a signal
at any instant, a kill that leaves no chance, a stale lock. The fault matrix generates these classes for every
command (tests/test_fault_matrix.py, second part); here each case is run as it happened, in processes of its
own, and followed to what a later command makes of it."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from hf_vanilla_transformer import locks
from hf_vanilla_transformer.outputs import UNFINISHED_MARK, check_finished, staged

from .script_runner import run_script_file
from .test_fault_matrix import hold_lock_as
from .test_faults import LOGGING_STEPS, _losses, _options, _start, _wait_for

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "multi30k"
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
MODEL = ROOT / "model_cards" / "vanilla-transformer-multi30k-de-en"


def _one_error(result) -> str:
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.returncode == 2 and len(errors) == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    return errors[0]


def test_train_started_twice_into_one_output_dir_or_resumed_while_it_runs_is_refused(
    translation_data, tmp_path
):
    """A job submitted twice, and a requeued resume while the first still trains: both refused, naming the
    first; the first trains on, each step logged once, in order."""
    run = tmp_path / "run"
    first = _start(translation_data, run)
    try:
        _wait_for(lambda: locks.lock_path(run).is_file() or first.poll() is not None)
        again = run_script_file("train.py", *_options(translation_data, run), cwd=tmp_path)
        assert f"process {first.pid} on {socket.gethostname()}" in _one_error(again)
        resumed = run_script_file(
            "train.py", *_options(translation_data, run, "--resume_from_checkpoint", "true"), cwd=tmp_path
        )
        assert f"process {first.pid}" in _one_error(resumed)
        _, stderr = first.communicate(timeout=300)
    finally:
        first.kill()
    assert first.returncode == 0, stderr[-3000:]
    steps = [step for step, _ in _losses(run)]
    assert steps == list(range(LOGGING_STEPS, 301, LOGGING_STEPS)), steps
    assert not locks.lock_path(run).exists()


def test_translate_run_twice_onto_one_output(tmp_path):
    """The second is refused naming the first; the first, stopped by SIGTERM, says how far it got; run again,
    it finishes: a line for a line."""
    source = tmp_path / "in.de"
    source.write_text("Ein Hund rennt durch den Park.\nZwei Katzen schlafen.\n" * 300, encoding="utf-8")
    output = tmp_path / "out.en"
    args = ["--model", MODEL, "--input", source, "--output", output, "--num_beams", "1", "--batch_size", "4"]
    first = subprocess.Popen(
        [sys.executable, str(ROOT / "scripts" / "translate.py"), *map(str, args)],
        cwd=tmp_path, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        record = output.with_name(output.name + ".translating.json")  # written once the model is loaded
        _wait_for(lambda: record.is_file() or first.poll() is not None)
        again = run_script_file("translate.py", *args, cwd=tmp_path)
        assert f"process {first.pid}" in _one_error(again)
        first.send_signal(signal.SIGTERM)
        _, stderr = first.communicate(timeout=120)
    finally:
        first.kill()
    assert first.returncode == 143 and "Traceback" not in stderr, stderr[-3000:]
    assert f"{output} is kept unfinished beside its record" in stderr, stderr[-3000:]
    finished = run_script_file("translate.py", *args, cwd=tmp_path)
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert len(output.read_text(encoding="utf-8").splitlines()) == 600


def _killed_at_write(script: str, args: list, cwd: Path, call: int = 1) -> subprocess.CompletedProcess:
    """`python scripts/<script> args` killed outright (SIGKILL: no handler runs) as its `call`-th write is
    about to be published."""
    code = (
        "import os, runpy, signal, sys\n"
        "from hf_vanilla_transformer import outputs\n"
        "calls = []\n"
        "def hook(point, output):\n"
        "    calls.append(point)\n"
        f"    if point == 'end' and calls.count('end') == {call}: os.kill(os.getpid(), signal.SIGKILL)\n"
        "outputs.write_hook = hook\n"
        f"sys.argv = [{str(ROOT / 'scripts' / script)!r}, *sys.argv[1:]]\n"
        "sys.path.insert(0, os.path.dirname(sys.argv[0]))\n"
        "runpy.run_path(sys.argv[0], run_name='__main__')\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code, *map(str, args)], cwd=cwd, env=ENV, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip


def test_prepare_translation_killed_while_it_saves_is_refused_by_training_and_made_again(
    translation_data, tmp_path
):
    """Killed outright while saving its data set: no folder a later command takes as whole. train.py names the
    unfinished data and the command that makes it; that command, run again, takes over its stale lock and
    finishes."""
    data = tmp_path / "data"
    prepare = ["--dataset", FIXTURE, "--source_lang", "de", "--target_lang", "en", "--output_dir", data]
    killed = _killed_at_write("prepare_translation.py", prepare, tmp_path)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    assert not data.exists() and (tmp_path / "data.unfinished" / UNFINISHED_MARK).is_file()
    train = [*_options(translation_data, tmp_path / "run")]
    train[train.index("--dataset") + 1] = str(data)
    refused = _one_error(run_script_file("train.py", *train, cwd=tmp_path))
    assert "is unfinished" in refused and "prepare_translation.py" in refused, refused
    again = run_script_file("prepare_translation.py", *prepare, cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "Taking over the lock" in again.stderr and "that process has ended" in again.stderr
    assert (data / "dataset_dict.json").is_file() and not (tmp_path / "data.unfinished").exists()
    check_finished(data)


def test_average_checkpoints_killed_between_weights_and_tokenizer_is_refused_by_evaluation(
    translation_data, tmp_path
):
    """Killed after its weights are written and before its tokenizer: evaluate_model.py refuses the folder in
    one line naming the command to run again, under the folder's name or the staging's."""
    from .test_fault_matrix import RECIPE, TINY

    run = tmp_path / "run"
    data, tokenizer = translation_data / "data", translation_data / "tokenizer"
    trained = run_script_file(
        "train.py", RECIPE, "--dataset", data, "--tokenizer", tokenizer, *TINY, "--max_steps", "2",
        "--save_strategy", "steps", "--save_steps", "1", "--output_dir", run, cwd=tmp_path,
    )  # fmt: skip
    assert trained.returncode == 0, trained.stderr[-3000:]
    averaged = tmp_path / "averaged"
    killed = _killed_at_write(
        "average_checkpoints.py", ["--run_dir", run, "--last", "2", "--output_dir", averaged], tmp_path
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    for model in (averaged, tmp_path / "averaged.unfinished"):
        line = _one_error(
            run_script_file(
                "evaluate_model.py",
                "--model",
                model,
                "--dataset",
                data,
                "--max_examples",
                "2",
                "--num_beams",
                "1",
                cwd=tmp_path,
            )  # fmt: skip
        )
        assert "is unfinished" in line and "average_checkpoints.py" in line, line


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_generate_series_stopped_by_sigterm_takes_its_workers_with_it(tmp_path):
    pytest.importorskip("symengine")
    out = tmp_path / "series"
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "scripts" / "generate_series.py"), "--num_examples", "100000",
         "--num_proc", "2", "--output_dir", str(out)],
        cwd=tmp_path, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        _wait_for(lambda: len(_children(process.pid)) >= 2 or process.poll() is not None, every=0.05)
        workers = _children(process.pid)
        time.sleep(1.0)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 143, stderr[-3000:]
    assert "Traceback" not in stderr and stderr.count("Stopped by SIGTERM") == 1, stderr[-3000:]
    _wait_for(lambda: not any(_alive(pid) for pid in workers), timeout=10, every=0.05)
    assert not out.exists() and not list(tmp_path.glob("*.unfinished")) and not list(tmp_path.glob("*.lock"))


def test_prepare_translation_with_workers_ended_by_ctrl_c_in_one_line(translation_data, tmp_path):
    """Ctrl-C reaches the whole foreground group, the workers of `datasets.map(num_proc=2)` too: one line,
    status 130, no traceback from any of them, and no output."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    import gzip

    for name in FIXTURE.iterdir():
        if name.suffix == ".gz":
            lines = gzip.decompress(name.read_bytes()).decode().splitlines(keepends=True)
            (corpus / name.name).write_bytes(gzip.compress("".join(lines * 400).encode()))
    out = tmp_path / "data"
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "scripts" / "prepare_translation.py"), "--dataset", str(corpus),
         "--source_lang", "de", "--target_lang", "en", "--tokenizer", str(translation_data / "tokenizer"),
         "--max_source_length", "96", "--max_target_length", "96", "--num_proc", "2",
         "--output_dir", str(out)],
        cwd=tmp_path, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    stderr_lines: list[str] = []
    reader = threading.Thread(target=lambda: stderr_lines.extend(process.stderr), daemon=True)
    reader.start()
    try:
        _wait_for(
            lambda: len(_children(process.pid)) >= 2 or process.poll() is not None, timeout=300, every=0.02
        )
        os.killpg(process.pid, signal.SIGINT)
        process.wait(timeout=60)
        reader.join(timeout=10)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    stderr = "".join(stderr_lines)
    assert process.returncode == 130, stderr[-3000:]
    assert "Traceback" not in stderr and stderr.count("Stopped by SIGINT") == 1, stderr[-3000:]
    assert not (tmp_path / "data-tokenized").exists() and not list(tmp_path.glob("*.unfinished"))


LATE_FORK_CALLBACK = """
import os, signal, time
from hf_vanilla_transformer import stopping

stopping.install()


def late(): # a library's fork callback, registered after stopping's (filelock's, imported late)
    os.kill(os.getpid(), signal.SIGINT)
    for _ in range(100000):  # the signal is handled here, inside the callback
        pass


os.register_at_fork(after_in_parent=late)
try:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    time.sleep(5)
    print("not stopped")
except stopping.Stopped:
    print("stopped")
"""


def test_a_stop_during_a_fork_callback_registered_later_is_not_swallowed(tmp_path):
    """A Ctrl-C that lands in a fork callback of a library imported after `stopping` (their callbacks run
    after its own) stops the command in its own code, instead of being swallowed with a traceback."""
    from .script_runner import run_code

    result = run_code(LATE_FORK_CALLBACK, cwd=tmp_path)
    assert result.stdout.strip() == "stopped", result.stderr[-2000:]
    assert "Traceback" not in result.stderr and "Exception ignored" not in result.stderr, result.stderr


# The lock itself.


def test_a_lock_whose_holder_has_ended_on_this_host_is_taken_over_at_once(tmp_path, capsys):
    ended = subprocess.Popen(["true"])
    ended.wait()
    output = tmp_path / "out"
    hold_lock_as(output, ended.pid)
    lock = locks.OutputLock(output)
    lock.acquire()
    assert f"Taking over the lock of {output}" in capsys.readouterr().err
    assert locks.read_holder(lock.path).pid == os.getpid()
    lock.release()
    assert not lock.path.exists()


def _held_elsewhere(output: Path, seconds_ago: float) -> Path:
    path = hold_lock_as(output, 1)
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, "host": "another-node"}))
    past = time.time() - seconds_ago
    os.utime(path, (past, past))
    return path


def test_a_lock_from_another_host_is_stale_only_when_it_stops_being_renewed(tmp_path, capsys):
    output = tmp_path / "out"
    _held_elsewhere(output, locks.RENEW_EVERY)
    with pytest.raises(locks.OutputLockedError, match="process 1 on another-node"):
        locks.OutputLock(output).acquire()
    _held_elsewhere(output, locks.STALE_AFTER + 10)
    lock = locks.OutputLock(output)
    lock.acquire()
    assert "has not been renewed" in capsys.readouterr().err
    lock.release()


def test_a_holder_renews_its_lock_and_releases_only_its_own(tmp_path, monkeypatch):
    monkeypatch.setattr(locks, "RENEW_EVERY", 0.05)
    output = tmp_path / "out"
    lock = locks.OutputLock(output)
    lock.acquire()
    past = time.time() - 1000
    os.utime(lock.path, (past, past))
    _wait_for(lambda: time.time() - lock.path.stat().st_mtime < 100, timeout=5, every=0.01)
    lock.path.unlink()
    other = hold_lock_as(output, os.getppid())  # taken by another process meanwhile (a user removed ours)
    lock.release()
    assert other.is_file()


def test_only_the_first_process_of_a_launch_takes_locks(tmp_path, monkeypatch):
    locks.command_started()
    monkeypatch.setenv("RANK", "1")
    locks.hold(tmp_path / "out")
    assert not locks.lock_path(tmp_path / "out").exists()
    monkeypatch.setenv("RANK", "0")
    locks.hold(tmp_path / "out")
    assert locks.lock_path(tmp_path / "out").exists()
    locks.release_all()
    assert not locks.lock_path(tmp_path / "out").exists()


def test_a_staged_write_is_whole_or_absent(tmp_path):
    output = tmp_path / "folder"
    with pytest.raises(RuntimeError), staged(output) as staging:
        (staging / "half").write_text("written")
        assert (staging / UNFINISHED_MARK).is_file()
        raise RuntimeError("stopped half way")
    assert not output.exists() and not staging.exists()
    with staged(output) as staging:
        (staging / "whole").write_text("written")
    assert sorted(path.name for path in output.iterdir()) == ["whole"]
    locks.release_all()


def test_a_read_only_hf_home_is_named_before_any_work(translation_data, tmp_path):
    """As a user meets it: HF_HOME where nothing can be written, read by the libraries as they are imported
    (the fault matrix sets their settings in-process). Data files need `datasets`' cache: one line naming it,
    nothing written."""
    from datasets import load_from_disk

    folder = tmp_path / "jsonl"
    folder.mkdir()
    for split, rows in load_from_disk(str(translation_data / "data")).items():
        rows.to_json(str(folder / f"{split}.jsonl"))
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "prepare_translation.py"), "--dataset", str(folder),
         "--source_lang", "de", "--target_lang", "en", "--output_dir", str(tmp_path / "data")],
        cwd=tmp_path, env={**ENV, "HF_HOME": "/proc/self/no-cache"}, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    line = _one_error(result)
    assert "/proc/self/no-cache" in line and "HF_DATASETS_CACHE" in line, line
    assert sorted(path.name for path in tmp_path.iterdir()) == ["jsonl"]
