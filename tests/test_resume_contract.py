"""The resume contract (docs/training.md, "Faults and resuming"): each checkpoint records what decides its
batches and its model (`resume_contract.json`); a resume with any of it changed is refused in one line naming
the option and both values, before training starts, unless `--allow_changed_options` names it (the log then
does); a finished run resumed changes nothing. One tiny run of 4 steps is trained for the module (and a
streamed one of 2 for the streaming cases); every refusal is a resume of one of its checkpoints."""

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
from datasets import load_from_disk
from transformers import AutoTokenizer

from hf_vanilla_transformer.training import COMPLETE_NAME, CONTRACT_NAME
from hf_vanilla_transformer.training.checkpoints import write_complete_record

from .script_runner import run_script_file
from .test_train_scripts import RECIPE, _tiny

ALLOW = "--allow_changed_options"


def _options(translation_data, out, *extra) -> list:
    """The paper's Multi30k recipe shrunk to the fixture: 4 updates of a tiny model, a checkpoint every 2."""
    return [RECIPE, *_tiny(translation_data), "--max_tokens", "200", "--max_steps", "4",
            "--warmup_steps", "2", "--logging_steps", "1", "--save_steps", "2", "--eval_strategy", "no",
            "--load_best_model_at_end", "false", "--dataloader_num_workers", "0", "--output_dir", out,
            *extra]  # fmt: skip


def _train(translation_data, out, *extra):
    return run_script_file("train.py", *_options(translation_data, out, *extra), cwd=out.parent)


@pytest.fixture(scope="module")
def run(translation_data, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("contract") / "run"
    result = _train(translation_data, out)
    assert result.returncode == 0, result.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def streamed_run(translation_data, tmp_path_factory) -> Path:
    """The same recipe, the fixture's save_to_disk folder read as a stream (its Arrow files): 2 updates."""
    out = tmp_path_factory.mktemp("contract-streamed") / "run"
    result = _train(translation_data, out, "--streaming", "true", "--stream_buffer", "16", "--max_steps", "2")
    assert result.returncode == 0, result.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def other_inputs(translation_data, tmp_path_factory) -> dict[str, Path]:
    """A tokenizer with one token more, and the data set with fewer training pairs."""
    folder = tmp_path_factory.mktemp("other-inputs")
    tokenizer = AutoTokenizer.from_pretrained(translation_data / "tokenizer")
    tokenizer.add_tokens(["zzzz"])
    tokenizer.save_pretrained(folder / "tokenizer")
    data = load_from_disk(str(translation_data / "data"))
    data["train"] = data["train"].select(range(200))
    data.save_to_disk(folder / "data")
    return {"tokenizer": folder / "tokenizer", "data": folder / "data"}


def _record(checkpoint: Path) -> dict:
    return json.loads((checkpoint / CONTRACT_NAME).read_text())


def _edit_record(checkpoint: Path, edit) -> None:
    """Change what `checkpoint` records (as if the run had been started so), keeping it whole."""
    record = _record(checkpoint)
    edit(record)
    (checkpoint / CONTRACT_NAME).write_text(json.dumps(record))
    write_complete_record(checkpoint, int(checkpoint.name.rsplit("-", 1)[1]))


def _copy_checkpoint(run: Path, tmp_path: Path, step: int = 2) -> Path:
    checkpoint = tmp_path / "run" / f"checkpoint-{step}"
    shutil.copytree(run / f"checkpoint-{step}", checkpoint)
    return checkpoint


def _refusal(result) -> str:
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    return line


def _allowed_in(line: str) -> list[str]:
    """The names the refusal offers to --allow_changed_options."""
    return line.split(f"{ALLOW} ")[1].split(" to go on anyway")[0].split()


def _options_given(name: str, other_inputs) -> list:
    tokenizer, data = other_inputs["tokenizer"], other_inputs["data"]
    return {
        "max_tokens": ["--max_tokens", "300"],
        "batch_order": ["--batch_order", "padded_length"],
        "batch_size_multiple": ["--batch_size_multiple", "1"],
        "seed": ["--seed", "1"],
        "gradient_accumulation_steps": ["--gradient_accumulation_steps", "2"],
        "ignore_data_skip": ["--ignore_data_skip", "true"],
        "average_tokens_across_devices": ["--average_tokens_across_devices", "false"],
        "lr_scheduler_type": ["--lr_scheduler_type", "constant_with_warmup"],
        "lr_scheduler_kwargs": ["--lr_scheduler_kwargs", '{"timescale": 10}'],
        "warmup_steps": ["--warmup_steps", "3"],
        "decay_by_clock": ["--decay_by_clock", "true", "--lr_scheduler_type", "linear"],
        "max_grad_norm": ["--max_grad_norm", "1.0"],
        "optim": ["--optim", "sgd"],
        "optim_args": ["--optim_args", "momentum=0.9"],
        "label_smoothing_factor": ["--label_smoothing_factor", "0.1"],
        "neftune_noise_alpha": ["--neftune_noise_alpha", "5"],
        "source_lang": ["--source_lang", "en", "--target_lang", "de"],
        "target_lang": ["--source_lang", "en", "--target_lang", "de"],
        "split_punctuation": ["--split_punctuation", "true"],
        "max_source_length": ["--max_source_length", "64"],
        "max_target_length": ["--max_target_length", "64"],
        "long_pairs": ["--long_pairs", "truncate"],
        "max_train_examples": ["--max_train_examples", "100"],
        "streaming": ["--streaming", "true"],
        "preset": ["--preset", "transformer-small"],
        "config_overrides": ["--config_overrides", '{"dropout": 0.3}'],
        "tokenizer": ["--tokenizer", tokenizer],
        "dataset": ["--dataset", data],
    }.get(name)


# What cannot be changed from the command line here (a CPU, one process, this recipe's task options): the
# checkpoint records the other value instead, as a run started with it would have.
RECORDED_OTHERWISE = {
    "task": "series",
    "num_processes": 2,
    "bf16": True,
    "fp16": True,
    "max_warmup_fraction": 0.5,
}
# Of the streamed run only.
STREAMED = {"stream_buffer": ["--streaming", "true", "--stream_buffer", "32"]}
CASES = [
    *("max_tokens batch_order batch_size_multiple seed gradient_accumulation_steps ignore_data_skip "
      "average_tokens_across_devices lr_scheduler_type lr_scheduler_kwargs warmup_steps decay_by_clock "
      "max_grad_norm optim optim_args label_smoothing_factor neftune_noise_alpha source_lang target_lang "
      "split_punctuation max_source_length max_target_length long_pairs max_train_examples streaming preset "
      "config_overrides tokenizer dataset").split(),
    *RECORDED_OTHERWISE,
    "model_config",
]  # fmt: skip


# Recorded only where the Trainer makes the batches itself (no --max_tokens): cases of a run without a recipe.
BATCHED = {
    "per_device_train_batch_size": ["--per_device_train_batch_size", "4"],
    "auto_find_batch_size": ["--auto_find_batch_size", "true"],
    "dataloader_drop_last": ["--dataloader_drop_last", "true"],
    "train_sampling_strategy": ["--train_sampling_strategy", "sequential"],
    "data_seed": ["--data_seed", "5"],
}


def _batched_options(translation_data, out, *extra) -> list:
    """2 updates of batches of 8 pairs, the Trainer's own sampler: no recipe, no --max_tokens."""
    return ["--task", "translation", *_tiny(translation_data), "--per_device_train_batch_size", "8",
            "--max_steps", "2", "--warmup_steps", "1", "--save_steps", "2", "--eval_strategy", "no",
            "--output_dir", out, *extra]  # fmt: skip


@pytest.fixture(scope="module")
def batched_run(translation_data, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("contract-batched") / "run"
    result = run_script_file("train.py", *_batched_options(translation_data, out), cwd=out.parent)
    assert result.returncode == 0, result.stderr[-3000:]
    return out


def test_every_recorded_option_has_a_case(run, streamed_run, batched_run):
    """A new option recorded in the contract is tested the day it is added: the cases below cover them all."""
    recorded = {
        *_record(run / "checkpoint-2")["options"],
        *_record(streamed_run / "checkpoint-2")["options"],
        *_record(batched_run / "checkpoint-2")["options"],
    }
    assert recorded <= {*CASES, *STREAMED, *BATCHED}, recorded - {*CASES, *STREAMED, *BATCHED}
    record = _record(run / "checkpoint-4")
    assert {"tokenizer", "model_config", "data"} <= set(record)
    assert record["options"]["max_tokens"] == 200 and record["data"]["pairs"] > 0
    assert record["model_config"]["d_model"] == 32
    # Written before the checkpoint was marked whole, so its record covers it.
    assert CONTRACT_NAME in json.loads((run / "checkpoint-4" / COMPLETE_NAME).read_text())["files"]


@pytest.mark.parametrize("name", CASES)
def test_a_resume_with_a_recorded_option_changed_is_refused_naming_it(
    run, translation_data, other_inputs, tmp_path, name
):
    checkpoint = _copy_checkpoint(run, tmp_path)
    given = _options_given(name, other_inputs) or []
    if name in RECORDED_OTHERWISE:
        _edit_record(checkpoint, lambda record: record["options"].__setitem__(name, RECORDED_OTHERWISE[name]))
    elif name == "model_config":  # a --model folder edited, or a preset defined anew
        _edit_record(checkpoint, lambda record: record["model_config"].__setitem__("dropout", 0.3))
    result = _train(translation_data, checkpoint.parent, "--resume_from_checkpoint", checkpoint, *given)
    line = _refusal(result)
    assert line.startswith("error: ") and f" in {checkpoint}, now " in line, line
    assert "a resume with" in line and "changed is not exact" in line
    assert name in _allowed_in(line), line
    label = {"model_config": "the model's configuration"}.get(name, f"--{name}")
    assert f"{label} was " in line, line
    if name == "dataset":
        pairs = _record(checkpoint)["data"]["pairs"]
        assert f"({pairs:,} training pairs) in" in line and "(200 training pairs, other ones)" in line
    elif name not in ("model_config",):
        assert "Tokenizing" not in result.stderr  # refused before the data was read
    assert sorted(path.name for path in checkpoint.parent.iterdir()) == ["checkpoint-2"]  # nothing written


@pytest.mark.parametrize("name", BATCHED)
def test_a_resume_with_a_batch_option_of_the_trainer_changed_is_refused_naming_it(
    batched_run, translation_data, tmp_path, name
):
    checkpoint = _copy_checkpoint(batched_run, tmp_path)
    options = _batched_options(translation_data, checkpoint.parent, "--resume_from_checkpoint", checkpoint)
    line = _refusal(run_script_file("train.py", *options, *BATCHED[name], cwd=tmp_path))
    assert f"--{name} was " in line and f" in {checkpoint}, now " in line, line
    assert name in _allowed_in(line), line
    assert sorted(path.name for path in checkpoint.parent.iterdir()) == ["checkpoint-2"]  # nothing written


def test_the_refusal_names_both_values(run, translation_data, tmp_path):
    checkpoint = _copy_checkpoint(run, tmp_path)
    result = _train(translation_data, checkpoint.parent, "--resume_from_checkpoint", checkpoint,
                    "--max_tokens", "300", "--seed", "7")  # fmt: skip
    assert _refusal(result) == (
        f"error: --max_tokens was 200 in {checkpoint}, now 300; --seed was 0 there, now 7: a resume with "
        f"them changed is not exact; pass them as they were, or {ALLOW} max_tokens seed to go on anyway."
    )


def test_what_does_not_decide_batches_or_model_is_not_refused(run, translation_data, tmp_path):
    """Output, logging, saving and evaluation options, and a raised max_steps, resume without a word; an
    optimizer setting the checkpoint restores is said to have no effect."""
    checkpoint = _copy_checkpoint(run, tmp_path, step=4)
    result = _train(translation_data, checkpoint.parent, "--resume_from_checkpoint", checkpoint,
                    "--max_steps", "5", "--save_steps", "5", "--logging_steps", "2",
                    "--save_total_limit", "2", "--max_eval_examples", "10", "--eval_steps", "100",
                    "--generation_num_beams", "4",
                    "--adam_beta2", "0.99")  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Resuming with" not in result.stderr and "is not exact" not in result.stderr
    assert f"--adam_beta2 0.99 has no effect on a resumed run: {checkpoint} restores" in result.stderr
    assert (checkpoint.parent / "final").is_dir()


def test_allowed_the_run_goes_on_and_its_log_names_the_change(run, translation_data, tmp_path):
    checkpoint = _copy_checkpoint(run, tmp_path)
    result = _train(translation_data, checkpoint.parent, "--resume_from_checkpoint", checkpoint,
                    "--max_tokens", "300", ALLOW, "max_tokens")  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    (said,) = [line for line in result.stderr.splitlines() if "Resuming with" in line]
    assert "WARNING" in said
    assert f"Resuming with --max_tokens changed ({ALLOW}): 200 in {checkpoint}, 300 now" in said
    assert (checkpoint.parent / "final").is_dir()
    assert _record(checkpoint.parent / "checkpoint-4")["options"]["max_tokens"] == 300  # what it trained with
    # `all` allows anything; a name that is not recorded is refused.
    other = _train(
        translation_data, checkpoint.parent, "--resume_from_checkpoint", checkpoint, ALLOW, "max_token"
    )
    assert f"{ALLOW} max_token: not recorded in {checkpoint}" in _refusal(other)


def test_a_misspelt_allowed_name_is_refused_on_a_fresh_run_too_before_overwrite_deletes_anything(
    run, translation_data, tmp_path
):
    """A requeued job's command is its first launch's: a name no record holds is refused at once, not at the
    first resume hours later, and before --overwrite would delete the earlier run."""
    out = tmp_path / "run"
    shutil.copytree(run, out)
    before = _hashes(out)
    result = _train(translation_data, out, "--overwrite", ALLOW, "max_tokens", "dropuot")
    line = _refusal(result)
    assert f"{ALLOW} dropuot: no such recorded option" in line and "max_tokens" in line.split("any of")[1]
    assert _hashes(out) == before


def _hashes(folder: Path) -> dict[str, str]:
    return {
        path.relative_to(folder).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def test_resuming_a_finished_run_changes_nothing_and_says_it_is_finished(run, translation_data, tmp_path):
    """A requeued job: the run is finished, its final folder holds reports written since; nothing changes."""
    out = tmp_path / "run"
    shutil.copytree(run, out)
    (out / "final" / "evaluation_report.json").write_text('{"bleu": 1.0}\n')
    before = _hashes(out)
    for extra in ([], ["--max_tokens", "300"]):  # what it would refuse, it does not even look at
        result = _train(translation_data, out, "--resume_from_checkpoint", "true", *extra)
        assert result.returncode == 0, result.stderr[-3000:]
        (said,) = result.stdout.splitlines()
        assert said.startswith(f"{out} is finished: checkpoint-4 ends it (step 4 of --max_steps 4)"), said
        assert "To train it further, raise --max_steps above 4 and resume" in said
        assert _hashes(out) == before


def test_a_run_killed_while_writing_its_final_folder_gets_it(run, translation_data, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(run, out, ignore=shutil.ignore_patterns("final"))
    shutil.copytree(run / "final", out / "final.unfinished")  # cut short: only the staging folder
    result = _train(translation_data, out, "--resume_from_checkpoint", "true")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "checkpoint-4 ends the run" in result.stderr and (out / "final" / "config.json").is_file()
    assert not (out / "final.unfinished").exists()
    # A final folder older than the last checkpoint is an earlier end's (a run trained further, killed before
    # its new final folder): it is replaced.
    (out / "final" / "evaluation_report.json").write_text("{}\n")
    later = (out / "final" / "config.json").stat().st_mtime_ns + 10**9
    os.utime(out / "checkpoint-4" / COMPLETE_NAME, ns=(later, later))
    result = _train(translation_data, out, "--resume_from_checkpoint", "true")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "checkpoint-4 ends the run" in result.stderr and "is finished" not in result.stdout
    assert not (out / "final" / "evaluation_report.json").exists()


def test_a_changed_preset_is_refused_in_one_line_never_a_state_dict_traceback(
    run, translation_data, tmp_path
):
    checkpoint = _copy_checkpoint(run, tmp_path)
    resume = ["--resume_from_checkpoint", checkpoint, "--preset", "transformer-small"]
    line = _refusal(_train(translation_data, checkpoint.parent, *resume))
    assert f"--preset was transformer-tiny in {checkpoint}, now transformer-small" in line
    # Allowed, or from a checkpoint of an earlier version: the weights do not fit, said in one line.
    fits = f"error: The weights in {checkpoint} do not fit the model built now (model.shared.weight is ["
    line = _refusal(_train(translation_data, checkpoint.parent, *resume, ALLOW, "preset"))
    assert line.startswith(fits), line
    (checkpoint / CONTRACT_NAME).unlink()
    write_complete_record(checkpoint, 2)
    result = _train(translation_data, checkpoint.parent, *resume)
    assert _refusal(result).startswith(fits)
    assert "state_dict" not in result.stderr


def test_a_checkpoint_of_an_earlier_version_resumes_as_before_saying_it_is_unchecked(
    run, translation_data, tmp_path
):
    out = tmp_path / "run"
    shutil.copytree(run, out, ignore=shutil.ignore_patterns("final"))
    (out / "checkpoint-4" / CONTRACT_NAME).unlink()
    write_complete_record(out / "checkpoint-4", 4)
    result = _train(translation_data, out, "--resume_from_checkpoint", "true", "--max_tokens", "300")
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"{out / 'checkpoint-4'} holds no {CONTRACT_NAME} (saved by an earlier version)" in result.stderr
    assert "cannot be checked; resuming unchecked" in result.stderr
    assert (out / "final" / "config.json").is_file()


def test_a_record_from_before_long_pairs_resumes_with_its_default_and_refuses_another(
    run, translation_data, tmp_path
):
    """A checkpoint recorded before `--long_pairs` existed trained as `drop` does: resumed with the default it
    goes on without a word; with `truncate` (other pairs) it is refused, naming the option and both values."""
    checkpoint = _copy_checkpoint(run, tmp_path)
    _edit_record(checkpoint, lambda record: record["options"].pop("long_pairs"))
    resume = ["--resume_from_checkpoint", checkpoint]
    line = _refusal(_train(translation_data, checkpoint.parent, *resume, "--long_pairs", "truncate"))
    assert line.startswith(f"error: --long_pairs was drop in {checkpoint}, now truncate: "), line
    result = _train(translation_data, checkpoint.parent, *resume)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Resuming with" not in result.stderr and "is not exact" not in result.stderr
    assert _record(tmp_path / "run" / "checkpoint-4")["options"]["long_pairs"] == "drop"
    assert (checkpoint.parent / "final" / "config.json").is_file()


def test_a_streamed_run_resumed_without_streaming_or_another_buffer_is_refused(
    streamed_run, run, translation_data, tmp_path
):
    checkpoint = _copy_checkpoint(streamed_run, tmp_path)
    line = _refusal(_train(translation_data, checkpoint.parent, "--resume_from_checkpoint", checkpoint))
    assert f"--streaming was true in {checkpoint}, now false" in line and "streaming" in _allowed_in(line)
    line = _refusal(
        _train(
            translation_data,
            checkpoint.parent,
            "--resume_from_checkpoint",
            checkpoint,
            *STREAMED["stream_buffer"],
        )
    )
    assert line.startswith(f"error: --stream_buffer was 16 in {checkpoint}, now 32:"), line
    record = _record(checkpoint)
    assert record["data"]["pairs"] is None
    assert record["data"]["first_pairs"] == min(1000, _record(run / "checkpoint-2")["data"]["pairs"])


def test_the_plain_loop_records_refuses_and_leaves_a_finished_run_alone(translation_data, tmp_path):
    out = tmp_path / "loop"
    options = ["--task", "translation", *_tiny(translation_data), "--max_tokens", "200", "--max_steps",
               "2", "--save_steps", "2", "--warmup_steps", "2", "--logging_steps", "1",
               "--output_dir", out]  # fmt: skip
    result = run_script_file("train_accelerate.py", *options, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    state = out / "state-2"
    assert _record(state)["options"]["max_tokens"] == 200
    assert CONTRACT_NAME in json.loads((state / COMPLETE_NAME).read_text())["files"]
    before = _hashes(out)
    result = run_script_file(
        "train_accelerate.py", *options, "--resume_from_checkpoint", "true", cwd=tmp_path
    )
    assert result.returncode == 0 and f"{out} is finished: state-2 ends it" in result.stdout, result.stderr
    assert _hashes(out) == before
    again = [*options, "--max_steps", "4", "--max_tokens", "300", "--resume_from_checkpoint", "true"]
    line = _refusal(run_script_file("train_accelerate.py", *again, cwd=tmp_path))
    assert line.startswith(f"error: --max_tokens was 200 in {state}, now 300: a resume with it changed"), line


@pytest.mark.parametrize(
    ("max_steps", "epochs_ended", "ended_by"),
    [(10, False, "--max_steps"), (-1, True, "--num_train_epochs"), (-1, False, "--max_train_minutes")],
)
def test_a_finished_run_is_told_the_option_that_trains_it_further(
    tmp_path, max_steps, epochs_ended, ended_by
):
    """What ended the run is what it is told to raise: its steps, its epochs, or (neither run out) its time
    budget; an epoch-counted run stopped by the clock is not told to raise its epochs."""
    from types import SimpleNamespace

    from hf_vanilla_transformer.training.resume import how_it_ended, run_is_over

    checkpoint = tmp_path / "checkpoint-10"
    checkpoint.mkdir()
    state = {"global_step": 10, "max_steps": 10 if epochs_ended else 40, "num_train_epochs": 3}
    (checkpoint / "trainer_state.json").write_text(json.dumps(state))
    (checkpoint / "time_budget.json").write_text(json.dumps({"elapsed_seconds": 120.0}))
    training_args = SimpleNamespace(max_steps=max_steps, num_train_epochs=3)
    recipe_args = SimpleNamespace(max_train_minutes=2)
    assert run_is_over(checkpoint, training_args, recipe_args)
    assert f"raise {ended_by} above" in how_it_ended(checkpoint, training_args, recipe_args)[1]
