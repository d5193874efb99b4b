"""What a training update makes the host wait for, counted (tests/sync_worker.py): a read of a tensor's value
into Python, which on a GPU waits until every queued kernel has run, and a collective of torch.distributed,
from fetching the update's batches to the end of its step's callbacks (logging, saving and evaluating come
after, every so many steps by design). None on one process. On two: the Trainer's count of the update's
target tokens over both (`average_tokens_across_devices`, which makes two processes train as one; gathered
on the device, and nothing waits for it there), and every few steps the processes' shared reading
(`StepAgreement`: whether to stop, the time budget's clock), one all-reduce and one read."""

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from .test_scale_out import accelerate_launch
from .test_train_scripts import RECIPE, _tiny

ROOT = Path(__file__).resolve().parents[1]
WORKER = ROOT / "tests" / "sync_worker.py"
STEPS = 30
READING = ["all_reduce", "tolist (agreement.py"]


def _training(translation_data, out: Path) -> list[str]:
    """The paper's Multi30k recipe shrunk to the fixture, its time budget on and the learning rate decayed by
    the clock (read after every update), no evaluation."""
    return [str(ROOT / "scripts" / "train.py"), str(RECIPE), *_tiny(translation_data),
            "--max_tokens", "200", "--max_steps", str(STEPS), "--warmup_steps", "10",
            "--lr_scheduler_type", "linear", "--decay_by_clock", "true", "--logging_steps", "5",
            "--save_steps", "10", "--eval_strategy", "no", "--load_best_model_at_end", "false",
            "--dataloader_num_workers", "0", "--use_cpu", "true", "--output_dir", str(out)]  # fmt: skip


def _counts(folder: Path, rank: int) -> dict[int, list[str]]:
    counts = json.loads((folder / f"rank-{rank}.json").read_text())
    return {int(step): waits for step, waits in counts.items()}


def test_a_step_on_one_process_waits_for_nothing(translation_data, tmp_path):
    counts = tmp_path / "counts"
    counts.mkdir()
    result = subprocess.run(
        [sys.executable, str(WORKER), str(counts), *_training(translation_data, tmp_path / "run")],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    steps = _counts(counts, 0)
    assert sorted(steps) == list(range(1, STEPS + 1))
    assert {step: waits for step, waits in steps.items() if waits} == {}


@pytest.fixture(scope="module")
def two_processes(translation_data, tmp_path_factory):
    """Readings spaced by doubling alone (a target of an hour between them): the same steps on any machine."""
    folder = tmp_path_factory.mktemp("syncs")
    counts = folder / "counts"
    counts.mkdir()
    accelerate_launch("multi_gpu", WORKER, counts, *_training(translation_data, folder / "run"),
                      env={"SYNC_TARGET_SECONDS": "3600"})  # fmt: skip
    return [_counts(counts, rank) for rank in (0, 1)]


def test_an_update_on_two_processes_waits_for_its_token_count_and_the_spaced_reading(two_processes):
    for steps in two_processes:
        assert sorted(steps) == list(range(1, STEPS + 1))
        for step, waits in steps.items():
            waits = [wait[: len(READING[1])] for wait in waits]
            assert waits in (["all_gather"], ["all_gather", *READING]), (step, waits)
    readings = [[step for step, waits in steps.items() if len(waits) > 1] for steps in two_processes]
    assert readings[0] == readings[1] == [1, 2, 4, 8, 16]  # the same steps, or one would wait forever


def test_readings_are_spaced_by_the_main_process_clock(monkeypatch):
    """Steps of 0.5 s: the gap doubles from one step up to the target's 2 s (4 steps), then stays there; the
    budget's clock is the main process's, as shared."""
    import torch.distributed as dist

    from hf_vanilla_transformer.training import Interruption, StepAgreement, TimeBudget, agreement
    from hf_vanilla_transformer.training import budget as budget_module

    now = [100.0]
    monkeypatch.setattr(agreement.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(dist, "all_reduce", lambda values: None)  # one process's numbers: the sum
    budget = TimeBudget(minutes=1)
    shared = StepAgreement(Interruption(), budget, SimpleNamespace(num_processes=2, is_main_process=True,
                                                                    device="cpu"))  # fmt: skip
    budget.start()
    read_at = []
    for step in range(1, 25):
        now[0] += 0.5
        before = shared.readings
        shared.after_step(step)
        shared.after_step(step)  # a second caller of the same step reads nothing again
        if shared.readings > before:
            read_at.append(step)
            assert shared.readings == before + 1 and budget.elapsed() == step * 0.5
    assert read_at == [1, 2, 4, 8, 12, 16, 20, 24]
    # Read by several processes without an agreement, each would stop by its own clock: refused.
    unshared = TimeBudget(minutes=1)
    monkeypatch.setattr(budget_module, "PartialState", lambda: SimpleNamespace(num_processes=2))
    with pytest.raises(RuntimeError, match="several processes needs their shared reading"):
        unshared.elapsed()
