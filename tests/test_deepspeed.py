"""DeepSpeed ZeRO-2 and ZeRO-3 under the Trainer script, launched with the shipped configs
(scripts/accelerate_configs/deepspeed_zero{2,3}.yaml) on 2 CPU processes over gloo, in float32.

Each stage trains the paper's Multi30k recipe, shrunk to the committed fixture, for 6 updates in two launches:
the first stops at step 3, right after checkpoint-3 (an interrupted run), the second resumes from it into the
same run. One process that accumulates the gradients of two batches per update takes the batches the two
processes take together, so it is the reference: the same losses at every step, the same weights in every
checkpoint (up to rounding), and, after resuming, the same end.

On a CPU machine DeepSpeed compiles one C++ op: its shared-memory all-reduce (deepspeed_shm_comm), built
whenever DeepSpeed sets up its communication backend on Linux, although only inference tensor parallelism
calls it; nothing turns the build off. No other op is built: the Trainer's optimizer is torch's AdamW, and
nothing is offloaded (the configs'). The build takes one to four minutes on 2 cores, once per environment:
see `extension_cache`.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

from hf_vanilla_transformer.cli import make_parser, parse_recipe_and_args
from hf_vanilla_transformer.saving import save_model_folder
from hf_vanilla_transformer.tasks.translation.data import load_parallel_text
from hf_vanilla_transformer.training import LOSS_LOG_NAME, TRAINING_ARGUMENTS
from hf_vanilla_transformer.training.setup import seeded_model

from .script_runner import run_script_file
from .test_scale_out import accelerate_launch

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = Path(__file__).parent / "fixtures" / "multi30k"
RECIPE = ROOT / "scripts" / "recipes" / "multi30k_de_en_paper.yaml"
VOCAB = 400
# transformer-tiny widened so that every weight matrix, the tied embedding first, holds more than 100,000
# numbers: below that (DeepSpeed's default `stage3_param_persistence_threshold`) ZeRO-3 keeps a parameter
# whole on every process, and the tiny model would not be sharded at all. No dropout: the processes would
# draw other masks than one process.
MODEL = {"d_model": 320, "encoder_ffn_dim": 320, "decoder_ffn_dim": 320, "dropout": 0.0}


@pytest.fixture(scope="module")
def data(translation_data):
    """The fixture corpus as a saved DatasetDict and its joint BPE tokenizer (conftest's)."""
    return translation_data


def recipe_args(data: Path) -> list[str]:
    """The paper's Multi30k recipe on the fixture: a small model (`MODEL`), batches of 200 tokens, the
    schedule's warmup over 3 steps, a checkpoint and a validation (generated, scored by BLEU) every 3 steps,
    the loss logged every step. Run on the CPU, whatever the machine has."""
    return [str(RECIPE), "--dataset", str(data / "data"), "--tokenizer", str(data / "tokenizer"),
            "--preset", "transformer-tiny", "--config_overrides", json.dumps(MODEL),
            "--max_source_length", "96", "--max_target_length", "96", "--max_tokens", "200",
            "--warmup_steps", "3", "--save_steps", "3", "--eval_steps", "3", "--logging_steps", "1",
            "--max_eval_examples", "8", "--per_device_eval_batch_size", "4", "--generation_max_length", "8",
            "--generation_num_beams", "1", "--use_cpu", "true"]  # fmt: skip


@pytest.fixture(scope="module")
def initial_model(data, tmp_path_factory):
    """The weights a run of the recipe starts from, saved: built as train.py builds them (seeded)."""
    folder = tmp_path_factory.mktemp("initial") / "model"
    parser = make_parser(*TRAINING_ARGUMENTS)
    model_args, data_args, _, training_args = parse_recipe_and_args(
        parser, [*recipe_args(data), "--output_dir", str(folder.parent / "unused")]
    )
    tokenizer = AutoTokenizer.from_pretrained(data_args.tokenizer)
    model = seeded_model(model_args, data_args, tokenizer, training_args.seed)
    save_model_folder(model, tokenizer, folder)
    return folder


@pytest.fixture(scope="module")
def reference(data, tmp_path_factory):
    """One process, two batches accumulated per update, 6 updates in one go."""
    run = tmp_path_factory.mktemp("one-process") / "run"
    result = run_script_file(
        ROOT / "scripts" / "train.py", *recipe_args(data), "--gradient_accumulation_steps", "2",
        "--max_steps", "6", "--output_dir", str(run), cwd=run.parent, env={"OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert result.returncode == 0, f"{result.stdout[-2000:]}\n{result.stderr[-4000:]}"
    return run


def extension_cache() -> dict[str, str]:
    """Where torch builds DeepSpeed's op: inside this virtual environment, unless TORCH_EXTENSIONS_DIR says.

    torch's default folder (~/.cache/torch_extensions/py311_cpu) is one for every environment of a Python
    version, but a build made against one environment's torch and DeepSpeed is rebuilt for the next, and
    again for the first when it comes back: a developer's venv and CI's venvs on one machine would take turns
    at the build. Outside a virtual environment, torch's default stays."""
    if "TORCH_EXTENSIONS_DIR" in os.environ or sys.prefix == sys.base_prefix:
        return {}
    return {"TORCH_EXTENSIONS_DIR": str(Path(sys.prefix) / "torch_extensions")}


def launch(config: str, *args) -> subprocess.CompletedProcess:
    """`accelerate launch` of 2 processes (test_scale_out.py's), with time for the first launch in an
    environment, which compiles DeepSpeed's op."""
    return accelerate_launch(config, *args, env=extension_cache(), timeout=1500)


@pytest.fixture(scope="module", params=[2, 3], ids=["zero2", "zero3"])
def deepspeed_run(request, data, initial_model, tmp_path_factory):
    """(stage, run folder): 3 updates, then a second launch resuming from checkpoint-3 to step 6.

    ZeRO-2 builds the model as one process does. ZeRO-3 builds it already sharded (DeepSpeed's zero.Init),
    which draws the same initial distributions in another order: to compare with one process, it starts from
    the one process's initial weights, saved (`--model`)."""
    stage = request.param
    run = tmp_path_factory.mktemp(f"zero{stage}") / "run"
    start = ["--model", str(initial_model)] if stage == 3 else []
    script = ROOT / "scripts" / "train.py"
    config = f"deepspeed_zero{stage}"
    launch(config, script, *recipe_args(data), *start, "--max_steps", "3", "--output_dir", run)
    launch(config, script, *recipe_args(data), *start, "--max_steps", "6", "--output_dir", run,
                      "--resume_from_checkpoint", run / "checkpoint-3")  # fmt: skip
    return stage, run


def logged(run: Path) -> tuple[list[dict], list[dict]]:
    """The run's loss log: the training records of every step, and the validations."""
    records = [json.loads(line) for line in (run / LOSS_LOG_NAME).read_text().splitlines()]
    return [r for r in records if "loss" in r], [r for r in records if "eval_loss" in r]


def saved_folders(run: Path) -> list[Path]:
    return sorted(run.glob("checkpoint-*"), key=lambda path: int(path.name.split("-")[1])) + [run / "final"]


def test_resumed_launch_continues_the_run_from_its_checkpoint(deepspeed_run):
    """The second launch took over at step 4 with the run's history; both launches ran DeepSpeed's ZeRO on two
    processes (one optimizer shard each in every checkpoint)."""
    stage, run = deepspeed_run
    steps, evals = logged(run)
    assert [r["step"] for r in steps] == [1, 2, 3, 4, 5, 6]
    assert [r["step"] for r in evals] == [3, 6] and all(0 <= r["eval_bleu"] <= 100 for r in evals)
    state = json.loads((run / "checkpoint-6" / "trainer_state.json").read_text())
    assert state["global_step"] == 6
    assert [r["step"] for r in state["log_history"] if "loss" in r] == [1, 2, 3, 4, 5, 6]
    for checkpoint, step in (("checkpoint-3", 3), ("checkpoint-6", 6)):
        shards = sorted(path.name for path in (run / checkpoint / f"global_step{step}").iterdir())
        assert [name for name in shards if "optim_states" in name] == [
            f"zero_pp_rank_{rank}_mp_rank_00_optim_states.pt" for rank in (0, 1)
        ], shards
        # ZeRO-3 shards the weights as well: each process saves its own.
        assert sum("model_states" in name for name in shards) == (2 if stage == 3 else 1), shards


def test_two_processes_train_as_one_accumulating_their_batches(deepspeed_run, reference, initial_model, data):
    """The same losses, learning rates and validation losses at every step, the same weights in every saved
    folder, and a final model that computes the same function.

    Except the key projections' biases: attention is blind to them (they add, for each query, the same
    amount to all of its keys' scores, which the softmax ignores), so their gradient is zero up to rounding,
    and Adam, with its epsilon of 1e-9, turns that rounding into steps as large as any. The rounding differs
    where DeepSpeed reduces the gradients in another order; the function the model computes does not."""
    _, run = deepspeed_run
    steps, evals = logged(run)
    reference_steps, reference_evals = logged(reference)
    assert [r["step"] for r in reference_steps] == [r["step"] for r in steps]
    for sharded, single in zip(steps, reference_steps, strict=True):
        assert sharded["loss"] == pytest.approx(single["loss"], rel=1e-5), (sharded, single)
        assert sharded["learning_rate"] == pytest.approx(single["learning_rate"], rel=1e-6)
        assert sharded["epoch"] == pytest.approx(single["epoch"])
    for sharded, single in zip(evals, reference_evals, strict=True):
        assert sharded["step"] == single["step"]
        assert sharded["eval_loss"] == pytest.approx(single["eval_loss"], rel=1e-5), (sharded, single)
    assert steps[-1]["loss"] < steps[0]["loss"] - 0.5, steps

    initial = load_file(initial_model / "model.safetensors")
    for folder in saved_folders(run):
        weights = load_file(folder / "model.safetensors")
        expected = load_file(reference / folder.name / "model.safetensors")
        assert weights.keys() == expected.keys(), folder.name
        moved = 0.0
        for name, tensor in expected.items():
            moved = max(moved, float((tensor - initial[name]).abs().max()))
            # Rounding apart (ZeRO-3 sums the gradients in another order; Adam magnifies it where a gradient
            # is near zero), a hundredth of how far training moved the weights.
            if not name.endswith("k_proj.bias"):
                torch.testing.assert_close(
                    weights[name], tensor, atol=1e-4, rtol=1e-4, msg=f"{folder}: {name}"
                )
        assert moved > 1e-2  # training moved the weights: equal after moving, not merely equal at the start

    tokenizer = AutoTokenizer.from_pretrained(data / "tokenizer")
    pairs = load_parallel_text(FIXTURE, "de", "en")["validation"]["translation"][:8]
    batch = tokenizer(
        [p["de"] for p in pairs], text_target=[p["en"] for p in pairs], padding=True, return_tensors="pt"
    )
    batch["labels"] = batch["labels"].masked_fill(batch["labels"] == tokenizer.pad_token_id, -100)
    logits = []
    for folder in (run / "final", reference / "final"):
        with torch.no_grad():
            logits.append(AutoModelForSeq2SeqLM.from_pretrained(folder).eval()(**batch).logits)
    torch.testing.assert_close(logits[0], logits[1], atol=1e-4, rtol=1e-4)


def test_every_saved_folder_holds_the_tied_matrix_once_and_loads_it_tied(deepspeed_run):
    """Each checkpoint and the final model: one (vocabulary, d_model) matrix in model.safetensors, which
    from_pretrained loads whole (nothing missing, nothing left over) as the one Parameter of the four ties."""
    _, run = deepspeed_run
    folders = saved_folders(run)
    assert [folder.name for folder in folders] == ["checkpoint-3", "checkpoint-6", "final"]
    for folder in folders:
        weights = load_file(folder / "model.safetensors")
        embedding_shaped = [
            name for name, tensor in weights.items() if tensor.dim() == 2 and tensor.shape[0] == VOCAB
        ]
        assert embedding_shaped == ["model.shared.weight"], (folder.name, embedding_shaped)
        model, info = AutoModelForSeq2SeqLM.from_pretrained(folder, output_loading_info=True)
        assert not info["missing_keys"] and not info["unexpected_keys"], (folder.name, info)
        shared = model.model.shared.weight
        assert model.lm_head.weight is shared
        assert (
            model.model.encoder.embed_tokens.weight is shared
            and model.model.decoder.embed_tokens.weight is shared
        )
        assert torch.equal(shared, weights["model.shared.weight"]), folder.name


def test_average_checkpoints_averages_the_runs_last_two(deepspeed_run, tmp_path):
    _, run = deepspeed_run
    result = run_script_file(
        ROOT / "scripts" / "average_checkpoints.py", "--run_dir", str(run), "--last", "2",
        "--output_dir", str(tmp_path / "averaged"), cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]
    assert "Averaging checkpoint-3, checkpoint-6" in result.stdout
    first, last = (load_file(run / name / "model.safetensors") for name in ("checkpoint-3", "checkpoint-6"))
    averaged = load_file(tmp_path / "averaged" / "model.safetensors")
    assert averaged.keys() == last.keys()
    for name, tensor in averaged.items():
        torch.testing.assert_close(tensor, (first[name] + last[name]) / 2, msg=name)
    assert not torch.equal(first["model.shared.weight"], last["model.shared.weight"])  # a real average
    model = AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "averaged")
    assert model.lm_head.weight is model.model.shared.weight
