"""The model's configuration is checked like the options (issue 81): a `config_overrides` key that is no field
of the configuration, or a vocabulary that the tokenizer's tokens do not fit, is refused in one line before
any data is read, by every command that builds a model from them; a saved config.json, which holds keys of
transformers' own, still loads as it is."""

import json

import pytest
from transformers import AutoConfig, AutoTokenizer

from hf_vanilla_transformer import VanillaTransformerForConditionalGeneration
from hf_vanilla_transformer.saving import save_model_folder
from hf_vanilla_transformer.training import ModelArguments, model_config
from hf_vanilla_transformer.training.setup import CONFIG_FIELDS

from .conftest import tiny_config
from .script_runner import run_script_file

TINY = ["--preset", "transformer-tiny", "--max_source_length", "96", "--max_target_length", "96"]
# The Trainer's options for one step that writes only the final model.
TRAINER = ["--max_tokens", "600", "--max_steps", "1", "--warmup_steps", "1", "--eval_strategy", "no"]
TRAINER += ["--save_strategy", "no", "--load_best_model_at_end", "false", "--report_to", "none"]
LOOP = ["--max_tokens", "600", "--max_steps", "1", "--warmup_steps", "1", "--save_steps", "1000", "--use_cpu"]
PROFILE = ["--untimed_steps", "1", "--timed_steps", "1", "--operator_steps", "0"]


def _command(script: str, data: list, out) -> list:
    """A valid command line of `script` on `data` (`--dataset D --tokenizer T`), training into `out`."""
    own = {
        "train.py": TRAINER,
        "train_accelerate.py": LOOP,
        "benchmarks/profile_training.py": TRAINER + PROFILE,
    }
    return [*data, *TINY, *own[script], "--output_dir", out]


def _one_error_line(result) -> str:
    """The script's one `error:` line, once checked that it ended as a user error (status 2, no traceback)."""
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr[-3000:]
    return errors[0]


def _holds_no_model(out) -> bool:
    return not out.exists() or not any(out.rglob("config.json")) and not any(out.rglob("*.safetensors"))


@pytest.mark.parametrize(
    ("script", "given"),
    [
        ("train.py", "inline"),
        ("train.py", "file"),
        ("train.py", "recipe"),
        ("train_accelerate.py", "inline"),
        ("benchmarks/profile_training.py", "inline"),
    ],
)
def test_a_misspelt_config_field_is_refused_naming_the_nearest_field(
    translation_data, tmp_path, script, given
):
    data = ["--task", "translation", "--dataset", translation_data / "data"]
    data += ["--tokenizer", translation_data / "tokenizer"]
    overrides = {"dropout": 0.0, "d_modle": 64}
    out = tmp_path / "run"
    if given == "recipe":
        recipe = tmp_path / "recipe.yaml"
        recipe.write_text("config_overrides:\n  dropout: 0.0\n  d_modle: 64  # misspelt\n", encoding="utf-8")
        args = [recipe, *_command(script, data, out)]
    elif given == "file":
        (tmp_path / "overrides.json").write_text(json.dumps(overrides), encoding="utf-8")
        args = [*_command(script, data, out), "--config_overrides", tmp_path / "overrides.json"]
    else:
        args = [*_command(script, data, out), "--config_overrides", json.dumps(overrides)]
    line = _one_error_line(run_script_file(script, *args, cwd=tmp_path))
    assert "--config_overrides" in line and "'d_modle' (did you mean 'd_model'?)" in line, line
    assert "'dropout'" not in line, line  # a field is not named with the mistakes
    assert _holds_no_model(out)


@pytest.mark.parametrize("script", ["train.py", "train_accelerate.py"])
def test_a_vocabulary_smaller_than_the_tokenizers_is_refused_before_the_data_is_read(
    translation_data, tmp_path, script
):
    """The data set named does not exist: a check made after reading it would name the data set instead."""
    size = len(AutoTokenizer.from_pretrained(translation_data / "tokenizer"))
    data = ["--task", "translation", "--dataset", tmp_path / "no-data"]
    data += ["--tokenizer", translation_data / "tokenizer"]
    out = tmp_path / "run"
    command = _command(script, data, out)
    unread = _one_error_line(run_script_file(script, *command, cwd=tmp_path))
    assert "no-data" in unread, unread  # without the mistake, the data set is where the run fails

    small = run_script_file(script, *command, "--config_overrides", '{"vocab_size": 100}', cwd=tmp_path)
    line = _one_error_line(small)
    assert "vocab_size 100" in line and f"{size} tokens" in line and f"at least {size}" in line, line
    assert "no-data" not in line, line

    outside = run_script_file(script, *command, "--config_overrides", '{"eos_token_id": 5000}', cwd=tmp_path)
    line = _one_error_line(outside)
    assert "eos_token_id 5000" in line and f"vocabulary of {size} tokens" in line, line
    assert _holds_no_model(out)


def test_a_saved_model_smaller_than_the_tokenizer_is_refused_before_the_data_is_read(
    translation_data, tmp_path
):
    tiny_config(task="translation").save_pretrained(tmp_path / "model")  # a vocabulary of 40
    size = len(AutoTokenizer.from_pretrained(translation_data / "tokenizer"))
    data = ["--task", "translation", "--dataset", tmp_path / "no-data"]
    data += ["--tokenizer", translation_data / "tokenizer", "--model", tmp_path / "model"]
    result = run_script_file("train.py", *_command("train.py", data, tmp_path / "run"), cwd=tmp_path)
    line = _one_error_line(result)
    assert "vocab_size 40" in line and f"{size} tokens" in line and "resize_token_embeddings" in line, line
    assert "no-data" not in line, line


def test_a_saved_config_keeps_its_keys_that_are_no_fields(translation_data, tmp_path):
    """Only overrides are checked: a saved folder's config.json holds transformers' own keys (`auto_map`,
    `architectures`, ...), and both loading it and training from it go on as before."""
    tokenizer = AutoTokenizer.from_pretrained(translation_data / "tokenizer")
    config = tiny_config(vocab_size=len(tokenizer), task="translation")
    model = VanillaTransformerForConditionalGeneration(config)
    folder = save_model_folder(model, tokenizer, tmp_path / "model")
    saved = json.loads((folder / "config.json").read_text())
    saved["_name_or_path"] = "someone/else"
    (folder / "config.json").write_text(json.dumps(saved), encoding="utf-8")
    strays = {"auto_map", "custom_pipelines", "model_type", "_name_or_path"}
    assert strays <= set(saved) and strays.isdisjoint(CONFIG_FIELDS)  # no override may set these

    assert AutoConfig.from_pretrained(folder).auto_map == saved["auto_map"]
    assert model_config(ModelArguments(model=str(folder)), tokenizer).auto_map == saved["auto_map"]
    data = ["--task", "translation", "--dataset", translation_data / "data"]
    data += ["--tokenizer", translation_data / "tokenizer", "--model", folder]
    out = tmp_path / "run"
    result = run_script_file("train.py", *_command("train.py", data, out), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (out / "final" / "config.json").is_file()
