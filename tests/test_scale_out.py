"""Training on several processes with the engines users scale out with, on 2 CPU processes over gloo:
`scripts/train.py` (the Trainer) under `accelerate launch` with the shipped DDP and multi-node configs,
against one process that accumulates; and FSDP2 through Accelerate's own wrapping, configured by the
shipped `fsdp.yaml`."""

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForSeq2SeqLM

from hf_vanilla_transformer.training import LOSS_LOG_NAME

from .fsdp_worker import fresh_model
from .script_runner import run_script_file
from .test_train_scripts import RECIPE, _tiny

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "scripts" / "accelerate_configs"


def accelerate_launch(config: str, *args, options=(), check=True, env=None, timeout=600):
    """`accelerate launch --config_file scripts/accelerate_configs/<config>.yaml --num_processes 2 ARGS`, in
    float32 (the configs ask for bf16, a GPU setting), one thread a process: the two share this machine's
    cores. `options` go to the launcher, `env` to the processes."""
    result = subprocess.run(
        _launcher(config, *options, *map(str, args)),
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    if check:
        assert result.returncode == 0, (
            f"{' '.join(result.args)}\n{result.stdout[-2000:]}\n{result.stderr[-5000:]}"
        )
    return result


def _launcher(config: str, *args: str) -> list[str]:
    """The launch command; a free port (`0`) unless `args` name one: other tests launch processes too."""
    config_file = str(CONFIGS / f"{config}.yaml")
    port = [] if "--main_process_port" in args else ["--main_process_port", "0"]
    return [sys.executable, "-m", "accelerate.commands.launch", "--config_file", config_file,
            "--num_processes", "2", "--mixed_precision", "no", *port, *args]  # fmt: skip


def _training(translation_data, out, *options) -> list[str]:
    """scripts/train.py on the paper's Multi30k recipe shrunk to the fixture: 20 updates, no dropout (the
    processes would draw other masks than one process), logged every 5 steps, a checkpoint every 10, no
    evaluation; the recipe's time budget stays on (the processes agree every few updates whether it is
    spent)."""
    return [str(ROOT / "scripts" / "train.py"), str(RECIPE), *_tiny(translation_data),
            "--config_overrides", '{"dropout": 0.0}', "--max_tokens", "200", "--max_steps", "20",
            "--warmup_steps", "10", "--lr_scale", "0.2", "--logging_steps", "5", "--save_steps", "10",
            "--eval_strategy", "no", "--load_best_model_at_end", "false", "--use_cpu", "true",
            "--dataloader_num_workers", "0", "--output_dir", str(out), *options]  # fmt: skip


def _losses(run: Path) -> list[dict]:
    return [r for r in map(json.loads, (run / LOSS_LOG_NAME).read_text().splitlines()) if "loss" in r]


def _assert_same_weights(run: Path, reference: Path) -> None:
    ours, theirs = (load_file(folder / "final" / "model.safetensors") for folder in (run, reference))
    assert ours.keys() == theirs.keys()
    for name, tensor in theirs.items():
        torch.testing.assert_close(ours[name], tensor, atol=1e-5, rtol=1e-4, msg=name)


@pytest.fixture(scope="module")
def accumulated(translation_data, tmp_path_factory):
    """One process that accumulates the gradients of two consecutive batches per update: what two processes,
    each taking every other batch, must compute."""
    out = tmp_path_factory.mktemp("accumulated") / "run"
    result = run_script_file(*_training(translation_data, out, "--gradient_accumulation_steps", "2"),
                             cwd=out.parent, env={"OMP_NUM_THREADS": "1"})  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]
    return out


@pytest.fixture(scope="module")
def two_processes(translation_data, tmp_path_factory):
    out = tmp_path_factory.mktemp("ddp") / "run"
    result = accelerate_launch("multi_gpu", *_training(translation_data, out))
    return out, result


def test_trainer_on_two_processes_computes_what_one_process_accumulates(two_processes, accumulated):
    """The same updates, if and only if the processes took different batches, weighed every target token of
    the update alike, averaged their gradients, and held the same weights all along: so the same loss log and
    the same final weights. One process writes the log, the checkpoints and the final folder."""
    run, result = two_processes
    sharded, single = _losses(run), _losses(accumulated)
    assert [r["step"] for r in sharded] == [r["step"] for r in single] == [5, 10, 15, 20]
    assert single[-1]["epoch"] <= 1.0  # both went through the batches of one epoch in the same order
    for ours, theirs in zip(sharded, single, strict=True):
        assert ours["loss"] == pytest.approx(theirs["loss"], rel=1e-4)
        assert ours["epoch"] == pytest.approx(theirs["epoch"], abs=1e-6)
    assert sharded[-1]["loss"] < sharded[0]["loss"] - 0.5
    _assert_same_weights(run, accumulated)
    assert sorted(p.name for p in run.glob("checkpoint-*")) == ["checkpoint-10", "checkpoint-20"]
    assert result.stdout.count("Saved the trained model to") == 1


def test_trainer_resumed_on_two_processes_ends_as_the_uninterrupted_run(
    two_processes, translation_data, tmp_path
):
    """A run stopped after checkpoint-10 and resumed from it, on two processes, ends with the weights of the
    run that was never stopped: the data, schedule and optimizer continue where they were."""
    run, _ = two_processes
    stopped = tmp_path / "run"
    stopped.mkdir()
    shutil.copytree(run / "checkpoint-10", stopped / "checkpoint-10")
    accelerate_launch("multi_gpu", *_training(translation_data, stopped, "--resume_from_checkpoint",
                                              stopped / "checkpoint-10"))  # fmt: skip
    assert [r["step"] for r in _losses(stopped)] == [15, 20]
    for ours, theirs in zip(_losses(stopped), _losses(run)[2:], strict=True):
        assert ours["loss"] == pytest.approx(theirs["loss"], rel=1e-4)
    _assert_same_weights(stopped, run)


def _epochs(translation_data, out, *options) -> list[str]:
    """`_training` with dropout and batches of 800 tokens: 9 updates an epoch, so the 20 updates cross two
    epoch boundaries; every update logged, a checkpoint every 5."""
    return _training(translation_data, out, "--config_overrides", '{"dropout": 0.1}', "--max_tokens", "800",
                     "--logging_steps", "1", "--save_steps", "5", *options)  # fmt: skip


@pytest.fixture(scope="module")
def two_processes_with_dropout(translation_data, tmp_path_factory):
    out = tmp_path_factory.mktemp("ddp-dropout") / "run"
    accelerate_launch("multi_gpu", *_epochs(translation_data, out))
    return out


@pytest.mark.parametrize(
    ("checkpoint", "epoch"), [(10, 1 + 1 / 9), (15, 1 + 6 / 9)], ids=["start-of-epoch-2", "mid-epoch-2"]
)
def test_trainer_resumed_past_the_first_epoch_on_two_processes_ends_as_the_uninterrupted_run(
    two_processes_with_dropout, translation_data, tmp_path, checkpoint, epoch
):
    """Resumed on two processes one update into the second epoch, or in its middle, with dropout: each process
    takes the rest of the second epoch's batches in that epoch's order (not the first epoch's) and draws the
    masks it drew, so every update after the checkpoint and the final weights are the uninterrupted run's."""
    run = two_processes_with_dropout
    reference = {r["step"]: r for r in _losses(run)}
    assert reference[checkpoint]["epoch"] == pytest.approx(epoch) and reference[20]["epoch"] > 2
    stopped = tmp_path / "run"
    stopped.mkdir()
    shutil.copytree(run / f"checkpoint-{checkpoint}", stopped / f"checkpoint-{checkpoint}")
    accelerate_launch("multi_gpu", *_epochs(translation_data, stopped, "--resume_from_checkpoint",
                                            stopped / f"checkpoint-{checkpoint}"))  # fmt: skip
    # The last record of each step, whether or not resuming cuts the log back to the checkpoint.
    resumed = {r["step"]: r for r in _losses(stopped) if r["step"] > checkpoint}
    assert sorted(resumed) == list(range(checkpoint + 1, 21))
    for step, record in resumed.items():
        assert record["loss"] == pytest.approx(reference[step]["loss"], rel=1e-5), step
        assert record["epoch"] == pytest.approx(reference[step]["epoch"]), step
    _assert_same_weights(stopped, run)


def test_trainer_on_two_machines_of_one_process_each_agrees(two_processes, translation_data, tmp_path):
    """multi_node.yaml's settings on one host: two launchers, machine ranks 0 and 1, one process each, meeting
    on the loopback address through the static rendezvous. They train as the two processes of one machine
    do."""
    out = tmp_path / "run"
    with socket.socket() as probe:  # a free port for the rendezvous, which both launchers must be told
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])
    launcher = ["--num_machines", "2", "--main_process_ip", "127.0.0.1", "--main_process_port", port]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    training = _training(translation_data, out)
    machines = [
        subprocess.Popen(
            _launcher("multi_node", *launcher, "--machine_rank", str(rank), *training),
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            stdin=subprocess.DEVNULL,
        )
        for rank in (0, 1)
    ]
    for machine in machines:
        stdout, stderr = machine.communicate(timeout=600)
        assert machine.returncode == 0, f"{stdout[-2000:]}\n{stderr[-5000:]}"
    run, _ = two_processes
    assert [r["loss"] for r in _losses(out)] == pytest.approx([r["loss"] for r in _losses(run)], rel=1e-4)
    _assert_same_weights(out, run)


def test_a_launch_whose_processes_would_train_alone_is_refused(translation_data, tmp_path):
    """Without --use_cpu on a machine without GPUs, the Trainer would not shard: each process would train
    alone into the same folder. Refused in one line, before anything is written."""
    options = _training(translation_data, tmp_path / "run")
    del options[options.index("--use_cpu") : options.index("--use_cpu") + 2]
    result = accelerate_launch("multi_gpu", *options, check=False)
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert lines and "Launched as 2 processes" in lines[0], result.stderr[-3000:]
    assert "--use_cpu true" in lines[0]
    assert "Traceback" not in result.stderr.split(lines[0])[0]
    assert not (tmp_path / "run").exists()


def test_fsdp2_as_shipped_trains_the_tied_model_as_one_process_would(tmp_path):
    """Accelerate's FSDP2 wrapping puts the input and output embeddings in a group of their own; the model
    holds its one matrix in one module, so the wrapped model trains. Two processes, each on half of a batch,
    against one process on the whole batch: the loss falls, the matrix stays one Parameter, and the gathered
    weights equal the single process's, saved with one copy of the matrix. A checkpoint as the Trainer writes
    it under fsdp.yaml holds full weights (for averaging), and training resumed from it ends where the
    uninterrupted run ends."""
    accelerate_launch("fsdp", ROOT / "tests" / "fsdp_worker.py", tmp_path)
    ranks = [json.loads((tmp_path / f"rank-{rank}.json").read_text()) for rank in (0, 1)]
    assert [r["world"] for r in ranks] == [2, 2] and all(r["tied"] for r in ranks)
    assert ranks[0]["state_dict_type"].endswith("SHARDED_STATE_DICT")
    losses = ranks[0]["losses"]
    assert losses == ranks[1]["losses"] and losses == sorted(losses, reverse=True), losses
    assert losses[-1] < losses[0] - 1.0, losses
    assert ranks[0]["resumed_losses"] == pytest.approx(losses[-2:], rel=1e-5)

    single = AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "reference").state_dict()
    initial = fresh_model().state_dict()
    assert max(float((single[name] - initial[name]).abs().max()) for name in single) > 1e-2  # it trained
    assert (tmp_path / "checkpoint-3" / "pytorch_model_fsdp_0").is_dir()  # the shards it resumed from
    assert (tmp_path / "checkpoint-3" / "tokenizer.json").is_file()
    for folder in ("final", "resumed", "checkpoint-3"):
        weights = load_file(tmp_path / folder / "model.safetensors")
        matrices = [name for name, tensor in weights.items() if tensor.shape == (40, 32)]
        assert matrices == ["model.shared.weight"]
        model = AutoModelForSeq2SeqLM.from_pretrained(tmp_path / folder)
        assert model.lm_head.weight is model.model.encoder.embed_tokens.weight
        if folder != "checkpoint-3":
            for name, tensor in single.items():
                torch.testing.assert_close(model.state_dict()[name], tensor, atol=1e-5, rtol=1e-4, msg=name)
