"""What long runs meet, met on purpose: a kill at any instant (inside a step, inside a save, while the log is
written), Ctrl-C, SIGTERM, a full disk, a corrupt checkpoint, a killed launcher, a frozen process. Each run
of `scripts/train.py` here is a process of its own, stopped from outside as users' runs are stopped; every
resumed run ends with the weights and the loss log of a run that was never stopped."""

import json
import os
import random
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import torch
from safetensors.torch import load_file

from hf_vanilla_transformer.training import COMPLETE_NAME, LOSS_LOG_NAME, Interruption

from .script_runner import run_script_file
from .test_train_scripts import RECIPE, _tiny

ROOT = Path(__file__).resolve().parents[1]
TRAIN = ROOT / "scripts" / "train.py"
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
LOGGING_STEPS = 5


def _options(translation_data, out, *extra) -> list[str]:
    """The paper's Multi30k recipe shrunk to the fixture: 300 updates of a tiny model with dropout (resuming
    must restore the random state), a checkpoint every 50, the loss logged every 5; about 5 s of training."""
    return [str(RECIPE), *_tiny(translation_data), "--max_tokens", "200", "--max_steps", "300",
            "--warmup_steps", "10", "--logging_steps", str(LOGGING_STEPS), "--save_steps", "50",
            "--eval_strategy", "no", "--load_best_model_at_end", "false", "--output_dir", str(out),
            *extra]  # fmt: skip


def _start(translation_data, out, *extra) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(TRAIN), *_options(translation_data, out, *extra)],
        cwd=out.parent,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )


def _finish(process: subprocess.Popen, timeout=300) -> tuple[int, str]:
    _, stderr = process.communicate(timeout=timeout)
    return process.returncode, stderr


def _wait_for(condition, timeout=120.0, every=0.001) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("waited in vain")
        time.sleep(every)


def _losses(run: Path) -> list[tuple[int, float]]:
    records = [json.loads(line) for line in (run / LOSS_LOG_NAME).read_text().splitlines()]
    return [(r["step"], r["loss"]) for r in records if "loss" in r]


def _assert_as_uninterrupted(run: Path, reference: Path, stopped_at: int | None = None) -> None:
    """The same weights, each step logged once, and the same loss at every logged step. A run stopped between
    two records (`stopped_at`) logs the mean loss up to there, and after resuming, the mean of the steps after
    it: those two records are its own."""
    losses = _losses(run)
    assert [step for step, _ in losses] == sorted({step for step, _ in losses}), "a step logged twice"
    if stopped_at is not None and stopped_at % LOGGING_STEPS:
        own = {stopped_at, stopped_at + LOGGING_STEPS - stopped_at % LOGGING_STEPS}
        assert stopped_at in dict(losses)
        losses = [(step, loss) for step, loss in losses if step not in own]
        assert losses == [(step, loss) for step, loss in _losses(reference) if step not in own]
    else:
        assert losses == _losses(reference)
    ours, theirs = (load_file(folder / "final" / "model.safetensors") for folder in (run, reference))
    assert ours.keys() == theirs.keys()
    for name, tensor in theirs.items():
        torch.testing.assert_close(ours[name], tensor, atol=0, rtol=0, msg=name)


@pytest.fixture(scope="module")
def reference(translation_data, tmp_path_factory):
    out = tmp_path_factory.mktemp("faults") / "uninterrupted"
    code, stderr = _finish(_start(translation_data, out))
    assert code == 0, stderr[-3000:]
    return out


def _resume(translation_data, out) -> None:
    code, stderr = _finish(_start(translation_data, out, "--resume_from_checkpoint", "true"))
    assert code == 0, stderr[-3000:]
    first = next(line for line in stderr.splitlines() if "hf_vanilla_transformer" in line)
    assert "Resuming from" in first, first  # the log's first line says which checkpoint


def test_kill_during_a_save_then_resume_true_ends_as_the_uninterrupted_run(
    translation_data, reference, tmp_path
):
    out = tmp_path / "run"
    for _ in range(5):  # until the kill lands inside the save: the folder is there, its record is not
        process = _start(translation_data, out, "--overwrite")
        _wait_for(lambda: (out / "checkpoint-100").exists())
        time.sleep(random.uniform(0, 0.02))
        process.kill()
        process.wait()
        if not (out / "checkpoint-100" / COMPLETE_NAME).exists():
            break
    assert not (out / "checkpoint-100" / COMPLETE_NAME).exists(), "no kill landed inside the save"
    _resume(translation_data, out)
    _assert_as_uninterrupted(out, reference)
    assert all((folder / COMPLETE_NAME).is_file() for folder in out.glob("checkpoint-*"))


@pytest.mark.parametrize("signal_", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_saves_the_step_reached_in_one_line_and_resumes_exactly(
    translation_data, reference, tmp_path, signal_
):
    out = tmp_path / "run"
    process = _start(translation_data, out)
    _wait_for(lambda: (out / LOSS_LOG_NAME).exists())
    time.sleep(random.uniform(0.2, 1.0))
    process.send_signal(signal_)
    code, stderr = _finish(process)
    assert code == 128 + signal_, stderr[-3000:]
    assert "Traceback" not in stderr
    name = signal_.name
    assert f"{name}: saving a checkpoint at the end of this step" in stderr
    stopped = [line for line in stderr.splitlines() if line.startswith(f"Stopped by {name} at step ")]
    assert len(stopped) == 1, stderr[-3000:]
    step = int(stopped[0].split(" at step ")[1].split(",")[0])
    assert (out / f"checkpoint-{step}" / COMPLETE_NAME).is_file() and not (out / "final").exists()
    assert max(s for s, _ in _losses(out)) <= step
    _resume(translation_data, out)
    _assert_as_uninterrupted(out, reference, stopped_at=step)


def test_a_second_interrupt_leaves_at_once(monkeypatch):
    left, said = [], []
    monkeypatch.setattr(os, "_exit", left.append)
    monkeypatch.setattr(os, "write", lambda descriptor, data: said.append((descriptor, data.decode())))
    interruption = Interruption()
    interruption.phase = Interruption.TRAINING
    interruption._handle(signal.SIGINT, None)
    interruption._handle(signal.SIGTERM, None)  # what SLURM or a launcher passes on at once: the same request
    assert left == [] and interruption.received == signal.SIGINT
    interruption.signalled_at -= 2
    interruption._handle(signal.SIGINT, None)
    assert left == [130]
    assert said[-1] == (2, "\nSIGINT again: leaving now, without saving.\n")
    with pytest.raises(SystemExit) as stopped:  # before training: nothing to save, stop at once
        Interruption()._handle(signal.SIGTERM, None)
    assert stopped.value.code == 143
    finishing = Interruption()  # after training: the final folder is being saved, and is finished
    finishing.phase = Interruption.AFTER
    finishing._handle(signal.SIGTERM, None)
    assert "training is over; finishing the final folder" in said[-1][1] and left == [130]


def test_a_signal_after_a_peers_request_is_this_process_first(monkeypatch):
    """Both workers of a killed launcher signal themselves; one learns of the other's request at a step's end
    first (`FaultsCallback`). Its own signal, seconds later, is still its first: it saves with its peer."""
    left, said = [], []
    monkeypatch.setattr(os, "_exit", left.append)
    monkeypatch.setattr(os, "write", lambda descriptor, data: said.append((descriptor, data.decode())))
    interruption = Interruption()
    interruption.phase = Interruption.TRAINING
    interruption.received = signal.SIGTERM  # as `FaultsCallback.on_step_end` records a peer's request
    time.sleep(1.1)
    interruption._handle(signal.SIGTERM, None)
    assert left == [] and "saving a checkpoint at the end of this step" in said[-1][1]


def test_killed_at_random_instants_again_and_again_ends_as_the_uninterrupted_run(
    translation_data, reference, tmp_path
):
    _killed_again_and_again(translation_data, reference, tmp_path, kills=2, seed=0)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(3))
def test_killed_at_random_instants_many_times(translation_data, reference, tmp_path, seed):
    _killed_again_and_again(translation_data, reference, tmp_path, kills=8, seed=seed)


def _changed(path: Path):
    before = path.stat().st_mtime_ns if path.exists() else None
    return lambda: path.exists() and path.stat().st_mtime_ns != before


def _killed_again_and_again(translation_data, reference, tmp_path, kills: int, seed: int) -> None:
    """SIGKILL at a random instant of training (a step, a save, a write of the log) `kills` times in a row,
    each time resuming from the newest whole checkpoint, then a run to the end."""
    chance = random.Random(seed)
    out = tmp_path / "run"
    for _ in range(kills):
        if (out / "final").exists():
            break  # the run reached its end between two kills
        whole = any(out.glob(f"checkpoint-*/{COMPLETE_NAME}"))
        options = ("--resume_from_checkpoint", "true") if whole else ("--overwrite",)
        process = _start(translation_data, out, *options)
        began = _changed(
            out / LOSS_LOG_NAME
        )  # training has begun (or the run had only its final folder left)
        _wait_for(lambda: began() or process.poll() is not None)  # noqa: B023 (waited for here)
        time.sleep(chance.uniform(0, 2.5))
        process.kill()
        process.wait()
    if not (out / "final").exists():
        if any(out.glob(f"checkpoint-*/{COMPLETE_NAME}")):
            _resume(translation_data, out)
        else:
            code, stderr = _finish(_start(translation_data, out, "--overwrite"))
            assert code == 0, stderr[-3000:]
    _assert_as_uninterrupted(out, reference)


def test_resume_true_without_a_whole_checkpoint_says_so_in_one_line(translation_data, tmp_path):
    out = tmp_path / "run"
    (out / "checkpoint-50").mkdir(parents=True)  # a save killed at once: an empty folder
    result = run_script_file(
        TRAIN, *_options(translation_data, out, "--resume_from_checkpoint", "true"), cwd=tmp_path
    )
    assert result.returncode == 2
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert f"{out} holds no whole checkpoint-<step> folder to resume from" in line


@pytest.mark.parametrize("name", ["model.safetensors", "trainer_state.json", "optimizer.pt", "rng_state.pth"])
def test_a_truncated_file_of_a_checkpoint_is_named_with_the_checkpoint_to_take(
    reference, translation_data, tmp_path, name
):
    out = tmp_path / "run"
    shutil.copytree(reference, out, ignore=shutil.ignore_patterns("final"))
    cut = out / "checkpoint-300" / name
    cut.write_bytes(cut.read_bytes()[:1000])
    result = run_script_file(
        TRAIN,
        *_options(translation_data, out, "--resume_from_checkpoint", str(out / "checkpoint-300")),
        cwd=tmp_path,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert f"{out / 'checkpoint-300'} cannot be resumed from: {name} is 1000 bytes" in line
    assert f"Resume from {out / 'checkpoint-250'}, the newest whole one" in line
    if name != "optimizer.pt":
        return
    # `true` passes over it, saying so, and resumes from the one before.
    result = run_script_file(
        TRAIN,
        *_options(translation_data, out, "--resume_from_checkpoint", "true", "--max_steps", "250"),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"Resuming from {out / 'checkpoint-250'}, the newest whole checkpoint of {out} (passed over: " in (
        result.stderr
    )
    assert "checkpoint-300: optimizer.pt is 1000 bytes" in result.stderr


def _can_mount() -> bool:
    """Whether this machine lets a process mount a tmpfs in a mount namespace of its own."""
    if shutil.which("unshare") is None:
        return False
    probe = 'd=$(mktemp -d) && mount -t tmpfs -o size=1m tmpfs "$d"'
    return subprocess.run(["unshare", "-rm", "sh", "-c", probe], capture_output=True).returncode == 0


@pytest.mark.skipif(not _can_mount(), reason="needs a mount namespace (unshare -rm) to make a small disk")
def test_a_full_disk_is_named_with_the_folder_and_what_to_do(translation_data, tmp_path):
    """A 1.5 MB disk of its own (tmpfs in a private mount namespace): room for the first checkpoint, not
    the second."""
    disk = tmp_path / "disk"
    disk.mkdir()
    out = disk / "run"
    options = _options(translation_data, out, "--save_steps", "20", "--max_steps", "60")
    command = shlex.join([sys.executable, str(TRAIN), *options])
    # After the run, inside the namespace (the disk goes with it): the checkpoint before is still whole.
    check = shlex.join(
        [sys.executable, "-c", "from hf_vanilla_transformer.training import checkpoint_problem; "
         f"print('checkpoint-20:', checkpoint_problem({str(out / 'checkpoint-20')!r}))"]
    )  # fmt: skip
    mount = shlex.join(["mount", "-t", "tmpfs", "-o", "size=1500k", "tmpfs", str(disk)])
    result = subprocess.run(
        ["unshare", "-rm", "sh", "-c", f"{mount} && {{ {command}; echo status=$?; {check}; }}"],
        cwd=tmp_path,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "status=2" in result.stdout, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert f"No space left on device while writing to {out}" in line
    assert "--resume_from_checkpoint true" in line
    assert "checkpoint-20: None" in result.stdout  # no problem: whole


def _optimizer_rate(checkpoint: Path) -> float:
    """The peak learning rate the Trainer's optimizer was built with, as the checkpoint keeps it."""
    return torch.load(checkpoint / "optimizer.pt", weights_only=True)["param_groups"][0]["initial_lr"]


def test_fine_tuning_trains_at_the_learning_rate_given_or_at_a_fine_tuning_one(
    reference, translation_data, tmp_path
):
    """The user's fine-tuning command, without a recipe: a trained --model, its tokenizer, their pairs."""
    trained = reference / "final"

    def fine_tune(out, *extra):
        result = run_script_file(
            TRAIN, "--task", "translation", "--model", trained, "--tokenizer", trained,
            "--dataset", translation_data / "data", "--max_source_length", "96", "--max_target_length", "96",
            "--max_tokens", "600", "--max_steps", "2", "--save_steps", "2", "--eval_strategy", "no",
            "--output_dir", tmp_path / out, *extra, cwd=tmp_path,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr[-3000:]
        first = next(line for line in result.stderr.splitlines() if "hf_vanilla_transformer" in line)
        return first, _optimizer_rate(tmp_path / out / "checkpoint-2")

    first, rate = fine_tune("given", "--learning_rate", "5e-5")
    assert rate == pytest.approx(5e-5)
    assert "Fine-tuning: learning rate 5e-05, linear after 0 warmup steps (given: learning_rate)" in first
    first, rate = fine_tune("unset")
    assert rate == pytest.approx(5e-5)
    assert "Fine-tuning: learning rate 5e-05 (fine-tuning), linear after 0 warmup steps;" in first
    # A new model with a learning rate given trains at that rate, not eq. 3's.
    result = run_script_file(
        TRAIN,
        *_options(translation_data, tmp_path / "new", "--max_steps", "2", "--save_steps", "2"),
        "--learning_rate", "1e-3",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert _optimizer_rate(tmp_path / "new" / "checkpoint-2") == pytest.approx(1e-3)


def _launch(translation_data, out, *extra, env=None) -> subprocess.Popen:
    """scripts/train.py on 2 CPU processes under `accelerate launch` (multi_gpu.yaml), as a user starts it."""
    options = _options(translation_data, out, "--max_steps", "100000", "--use_cpu", "true", *extra)
    command = [sys.executable, "-m", "accelerate.commands.launch", "--config_file",
               str(ROOT / "scripts" / "accelerate_configs" / "multi_gpu.yaml"), "--num_processes", "2",
               "--mixed_precision", "no", "--main_process_port", "0", str(TRAIN), *options]  # fmt: skip
    return subprocess.Popen(
        command,
        cwd=out.parent,
        env={**ENV, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _workers(launcher: subprocess.Popen) -> list[psutil.Process]:
    def found():
        children = psutil.Process(launcher.pid).children(recursive=True)
        return [p for p in children if "train.py" in " ".join(p.cmdline())]

    _wait_for(lambda: len(found()) == 2, every=0.2)
    return found()


def _running(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_workers_of_a_killed_launcher_save_and_leave(translation_data, tmp_path):
    out = tmp_path / "run"
    launcher = _launch(translation_data, out, "--save_steps", "100000")  # no checkpoint but on a signal
    workers = []
    try:
        workers = _workers(launcher)
        _wait_for(lambda: (out / LOSS_LOG_NAME).exists(), every=0.2)
        launcher.kill()
        launcher.wait()
        time.sleep(10)
        assert not [worker for worker in workers if _running(worker)]
        _, stderr = launcher.communicate(timeout=10)  # what the workers wrote
        assert stderr.count("is gone: stopping this process") == 2, stderr[-3000:]
        # They left as on SIGTERM: a whole checkpoint at the step they reached.
        stopped = [line for line in stderr.splitlines() if line.startswith("Stopped by SIGTERM at step ")]
        assert len(stopped) == 1, stderr[-5000:]
        (line,) = stopped
        step = int(line.split(" at step ")[1].split(",")[0])
        assert (out / f"checkpoint-{step}" / COMPLETE_NAME).is_file()
    finally:
        for worker in workers:
            if _running(worker):
                worker.kill()


def test_a_frozen_process_ends_the_run_naming_it(translation_data, tmp_path):
    out = tmp_path / "run"
    # The launcher gives its workers 30 s to leave after one failed, then kills them: 3 s here.
    launcher = _launch(
        translation_data, out, "--stall_timeout", "10", env={"TORCH_ELASTIC_SHUTDOWN_TIMEOUT": "3"}
    )
    workers = []
    try:
        workers = _workers(launcher)
        _wait_for(lambda: (out / LOSS_LOG_NAME).exists(), every=0.2)
        (frozen,) = [worker for worker in workers if worker.environ().get("RANK") == "1"]
        frozen.suspend()  # SIGSTOP
        _, stderr = launcher.communicate(timeout=180)
        assert launcher.returncode != 0
        assert "error: process 1 of 2 has not answered for 10 s" in stderr
        assert "--stall_timeout sets the wait" in stderr
    finally:
        for worker in workers:
            if _running(worker):
                worker.kill()
