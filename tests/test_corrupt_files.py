"""A saved folder with a file cut short (a download or save that stopped half way) is refused in one line that
names the file and the fix, by the package's loaders and by the scripts, instead of a library's traceback
that names no file, or, for generation_config.json, a model that silently decodes greedily."""

import json
import shutil

import pytest
import torch

from hf_vanilla_transformer import VanillaTransformerForConditionalGeneration
from hf_vanilla_transformer.errors import CorruptFileError, UserError
from hf_vanilla_transformer.interop.updates import update_model_code
from hf_vanilla_transformer.saving import (
    check_files_parse,
    check_model_location,
    load_model_folder,
    save_model_folder,
)
from hf_vanilla_transformer.tokenization import load_tokenizer

from .conftest import make_word_tokenizer, tiny_config
from .script_runner import run_script_file

MODEL_FILES = ["config.json", "generation_config.json"]
TOKENIZER_FILES = ["tokenizer.json", "tokenizer_config.json"]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """One tiny saved model folder (model, generation config, tokenizer); each test truncates a copy."""
    torch.manual_seed(0)
    model = VanillaTransformerForConditionalGeneration(tiny_config()).eval()
    return save_model_folder(model, make_word_tokenizer(), tmp_path_factory.mktemp("saved") / "model")


def _cut_short(saved, tmp_path, name, folder_name="model"):
    """A copy of `saved` whose `name` holds the first half of its bytes, as a download stopped half way."""
    folder = shutil.copytree(saved, tmp_path / folder_name)
    data = (saved / name).read_bytes()
    (folder / name).write_bytes(data[: len(data) // 2])
    return folder


def _one_error_line(result) -> str:
    """The script's one `error:` line, once checked that it ended as a user error (status 2, no traceback)."""
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr[-3000:]
    return errors[0]


@pytest.mark.parametrize("name", MODEL_FILES + TOKENIZER_FILES)
def test_the_loader_names_a_file_cut_short_and_the_fix(saved, tmp_path, name):
    folder = _cut_short(saved, tmp_path, name)
    with pytest.raises(CorruptFileError) as raised:
        load_model_folder(folder)
    message = str(raised.value)
    assert message.startswith(f"{folder / name} is truncated or corrupt: it does not parse as JSON (")
    assert message.endswith(f"Download or save {folder} again.") and "\n" not in message
    # A user error that `except OSError` code still catches, with the parser's own error as its cause.
    assert isinstance(raised.value, UserError) and isinstance(raised.value, OSError)
    assert isinstance(raised.value.__cause__, json.JSONDecodeError)


def test_each_loader_checks_the_files_it_reads(saved, tmp_path):
    tokenizer_cut = _cut_short(saved, tmp_path, "tokenizer.json", "tokenizer-cut")
    with pytest.raises(CorruptFileError, match="tokenizer.json is truncated"):
        load_tokenizer(tokenizer_cut)
    check_model_location(tokenizer_cut)  # the model's own files are whole: nothing to refuse
    generation_cut = _cut_short(saved, tmp_path, "generation_config.json", "generation-cut")
    # from_pretrained alone drops it without a word and decodes greedily, not with the saved beam 4.
    assert (
        VanillaTransformerForConditionalGeneration.from_pretrained(generation_cut).generation_config.num_beams
        != 4
    )
    with pytest.raises(CorruptFileError, match="generation_config.json is truncated"):
        check_model_location(generation_cut)
    with pytest.raises(CorruptFileError, match="generation_config.json is truncated"):
        update_model_code(generation_cut)
    assert load_tokenizer(generation_cut).pad_token_id == 0  # the tokenizer's files are whole


def test_a_legacy_special_tokens_map_cut_short_is_named(saved, tmp_path):
    folder = shutil.copytree(saved, tmp_path / "model")
    (folder / "special_tokens_map.json").write_text('{"pad_token": "<pa', encoding="utf-8")
    with pytest.raises(CorruptFileError, match="special_tokens_map.json is truncated or corrupt"):
        load_tokenizer(folder)


def test_an_empty_or_binary_file_is_named_too(saved, tmp_path):
    folder = shutil.copytree(saved, tmp_path / "model")
    (folder / "config.json").write_bytes(b"")
    with pytest.raises(CorruptFileError, match="config.json is truncated or corrupt"):
        check_files_parse(folder)
    (folder / "config.json").write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(CorruptFileError, match="config.json is truncated or corrupt"):
        check_files_parse(folder)


def test_a_checkpoint_cut_short_says_to_resume_from_the_previous_one(saved, tmp_path):
    folder = _cut_short(saved, tmp_path, "config.json", "checkpoint-500")
    with pytest.raises(CorruptFileError, match=r"Resume from the previous checkpoint \(`--resume_from"):
        load_model_folder(folder)


def test_a_hub_id_is_left_to_the_libraries():
    check_files_parse("owner/model")  # not a folder here: nothing to read, nothing refused


@pytest.mark.parametrize("name", MODEL_FILES + TOKENIZER_FILES)
def test_a_script_prints_one_line_naming_the_file(saved, tmp_path, name):
    folder = _cut_short(saved, tmp_path, name)
    result = run_script_file("plot_attention.py", "--model", str(folder), "--text", "ein hund", cwd=tmp_path)
    line = _one_error_line(result)
    assert line.startswith(f"error: {folder / name} is truncated or corrupt"), line
    assert line.endswith(f"Download or save {folder} again."), line
    assert not (tmp_path / "attention.png").exists()


def test_evaluation_names_a_generation_config_cut_short_before_reading_data(saved, tmp_path):
    folder = _cut_short(saved, tmp_path, "generation_config.json")
    result = run_script_file(
        "evaluate_model.py", "--model", str(folder), "--task", "translation", "--dataset", "d", cwd=tmp_path
    )
    assert _one_error_line(result).startswith(f"error: {folder / 'generation_config.json'} is truncated")


@pytest.mark.parametrize("script", ["train.py", "train_accelerate.py"])
def test_training_names_a_tokenizer_file_cut_short(saved, tmp_path, script):
    folder = _cut_short(saved, tmp_path, "tokenizer.json")
    result = run_script_file(
        script, "--tokenizer", str(folder), "--dataset", "d", "--max_tokens", "99", cwd=tmp_path
    )
    assert _one_error_line(result).startswith(f"error: {folder / 'tokenizer.json'} is truncated")


def test_training_names_a_model_config_cut_short(saved, tmp_path):
    folder = _cut_short(saved, tmp_path, "config.json")
    result = run_script_file(
        "train.py", "--model", str(folder), "--tokenizer", str(saved), "--dataset", "d", cwd=tmp_path
    )
    assert _one_error_line(result).startswith(f"error: {folder / 'config.json'} is truncated")


def test_weights_cut_short_end_in_one_line_naming_the_weights(saved, tmp_path):
    folder = _cut_short(saved, tmp_path, "model.safetensors")
    result = run_script_file("plot_attention.py", "--model", str(folder), "--text", "ein hund", cwd=tmp_path)
    line = _one_error_line(result)
    assert line.startswith(f"error: Could not read the weights of {folder}: a .safetensors file"), line
    assert "truncated or corrupt" in line and "Download or save the model again" in line


def test_a_marian_folder_cut_short_is_named_before_conversion(tmp_path):
    pytest.importorskip("sentencepiece")
    from transformers import MarianConfig

    from hf_vanilla_transformer.tasks.translation.marian import convert_marian

    MarianConfig(vocab_size=40, d_model=32).save_pretrained(tmp_path / "marian")
    (tmp_path / "marian" / "vocab.json").write_text('{"<unk>": 1, "</s', encoding="utf-8")
    with pytest.raises(CorruptFileError, match="vocab.json is truncated or corrupt"):
        convert_marian(tmp_path / "marian", tmp_path / "out")
    assert not (tmp_path / "out").exists()
