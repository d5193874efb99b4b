"""Lengths in tokens, one rule (`hf_vanilla_transformer.lengths`): one check of a length against every limit
that bounds it, naming the limit that bites and the fix; the options of a training pair's lengths declared
once, so that every command that takes them shows the same help; prepare_translation.py's `--long_pairs
truncate` keeping every pair."""

import pytest
from datasets import load_from_disk

from hf_vanilla_transformer.errors import UsageError
from hf_vanilla_transformer.lengths import LengthArguments, check_length, smallest_limit

from .script_runner import run_script_file
from .test_script_help import built_parser
from .test_translation_data import FIXTURE

POSITIONS, TOKENIZER = "the model's max_position_embeddings", "the tokenizer's model_max_length"


def test_the_smallest_limit_set_is_the_one_that_bites():
    assert smallest_limit({POSITIONS: 256, TOKENIZER: 128}) == (TOKENIZER, 128)
    assert smallest_limit({POSITIONS: 128, TOKENIZER: 128}) == (POSITIONS, 128)  # the first named of equals
    assert smallest_limit({POSITIONS: None, TOKENIZER: 64}) == (TOKENIZER, 64)  # None: nothing sets it
    assert smallest_limit({POSITIONS: None}) is None


def test_a_length_is_refused_naming_the_limit_that_bites_and_its_fix():
    limits = {POSITIONS: 256, TOKENIZER: 128}
    fixes = {TOKENIZER: "retrain the tokenizer with a larger model_max_length"}
    check_length("max_source_length", 128, limits, fixes)  # at the limit
    check_length("max_source_length", None, limits, fixes)  # unset
    check_length("max_new_tokens", 10**6, {POSITIONS: None})  # no limit set
    with pytest.raises(UsageError) as refused:
        check_length("max_source_length", 200, limits, fixes)
    assert str(refused.value) == (
        "--max_source_length 200 is more than 128, the tokenizer's model_max_length: give "
        "--max_source_length 128 or less, or retrain the tokenizer with a larger model_max_length."
    )
    with pytest.raises(UsageError, match=r"^--max_new_tokens 300 is more than 256, the model's .*: give "):
        check_length("max_new_tokens", 300, {POSITIONS: 256})  # no fix given: a smaller value only
    for value in (1, 1.5, True):
        with pytest.raises(
            UsageError, match=r"^--max_source_length must be an integer >= 2 \(a token and </s>\)"
        ):
            check_length("max_source_length", value, limits, minimum=2)


def test_the_pair_length_options_are_declared_once_with_the_same_help_everywhere(monkeypatch):
    """Training (both scripts) and prepare_translation.py take the lengths from one dataclass: the same
    options, help, defaults and choices."""
    names = ("--max_source_length", "--max_target_length", "--long_pairs")
    shown = {}
    for script in ("train", "train_accelerate", "prepare_translation"):
        parser = built_parser(script, monkeypatch)
        actions = {action.option_strings[0]: action for action in parser._actions if action.option_strings}
        shown[script] = [(actions[name].help, actions[name].default, actions[name].choices) for name in names]
    assert shown["train"] == shown["train_accelerate"] == shown["prepare_translation"]
    help_, default, choices = shown["train"][2]
    assert default == "drop" and list(choices) == ["drop", "truncate"]
    assert "stop mid-sentence" in help_  # the reason for the default, beside it
    assert LengthArguments().long_pairs == "drop"
    with pytest.raises(UsageError, match=r"^--long_pairs must be one of drop, truncate, got 'cut'\.$"):
        LengthArguments(long_pairs="cut")
    with pytest.raises(UsageError, match=r"^--max_source_length must be at least 2, got 1\.$"):
        LengthArguments(max_source_length=1)


def test_prepare_translation_truncates_long_pairs_when_asked(tmp_path):
    from .test_translation_data import train_fixture_tokenizer

    train_fixture_tokenizer().save_pretrained(tmp_path / "tokenizer")
    common = ["--dataset", FIXTURE, "--source_lang", "de", "--target_lang", "en", "--tokenizer",
              tmp_path / "tokenizer", "--max_source_length", "24", "--max_target_length", "24"]  # fmt: skip
    dropped = run_script_file("prepare_translation.py", *common, "--output_dir", tmp_path / "d", cwd=tmp_path)
    truncated = run_script_file(
        "prepare_translation.py",
        *common,
        "--long_pairs",
        "truncate",
        "--output_dir",
        tmp_path / "t",
        cwd=tmp_path,
    )
    assert dropped.returncode == truncated.returncode == 0, truncated.stderr[-2000:]
    raw, kept, cut = (
        load_from_disk(str(tmp_path / name))["train"] for name in ("t", "d-tokenized", "t-tokenized")
    )
    assert cut.num_rows == raw.num_rows > kept.num_rows
    assert (
        f"train: kept {raw.num_rows} tokenized pairs, truncated {raw.num_rows - kept.num_rows} too long"
        in (truncated.stdout)
    )
    assert (
        f"train: kept {kept.num_rows} tokenized pairs, dropped {raw.num_rows - kept.num_rows} too long"
        in (dropped.stdout)
    )
    assert max(map(len, cut["input_ids"])) == max(map(len, cut["labels"])) == 24
