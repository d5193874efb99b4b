"""Saved folders keep working as transformers moves: the cache under both of its names, no silently ignored
keyword, no deprecation warning of ours, and folders saved by an earlier version repaired in place.

CI runs this file, with the rest of the suite, under the oldest supported transformers and the newest."""

import copy
import json
import logging
import shutil
import warnings
from pathlib import Path

import pytest
import torch
from huggingface_hub.errors import StrictDataclassFieldValidationError
from transformers import AutoConfig, EncoderDecoderCache

from hf_vanilla_transformer import VanillaTransformerConfig, VanillaTransformerForConditionalGeneration
from hf_vanilla_transformer.interop.updates import outdated_code_files, update_model_code
from hf_vanilla_transformer.modeling_vanilla_transformer import CACHE_FIELD
from hf_vanilla_transformer.saving import CODE_FILES, save_model_folder

from .remote_code import run_without_package
from .script_runner import run_script_file

ROOT = Path(__file__).resolve().parents[1]
OLD_FOLDER = Path(__file__).parent / "fixtures" / "folder_saved_before_cache_rename"
SOURCES = ["ein hund läuft im park", "zwei katzen schlafen", "a dog"]

# Greedy and beam search with scores, from a folder, in a process without the package.
DECODE_SCRIPT = """
    import json, sys
    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer
    folder, sources = sys.argv[1], json.loads(sys.argv[2])
    model = AutoModelForSeq2SeqLM.from_pretrained(folder, trust_remote_code=True).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
    batch = tokenizer(sources, return_tensors="pt", padding=True, return_token_type_ids=False)
    greedy = model.generate(**batch, num_beams=1, max_new_tokens=8, min_new_tokens=8,
                            return_dict_in_generate=True, output_scores=True)
    beam = model.generate(**batch, num_beams=3, max_new_tokens=8, early_stopping=True,
                          return_dict_in_generate=True, output_scores=True)
    print(json.dumps({
        "greedy": greedy.sequences.tolist(),
        "greedy_scores": torch.stack(greedy.scores, 1).max(-1).values.tolist(),
        "beam": beam.sequences.tolist(),
        "beam_scores": beam.sequences_scores.tolist(),
    }))
"""


def _decode_with_package(folder: Path) -> dict:
    model = VanillaTransformerForConditionalGeneration.from_pretrained(folder).eval()
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    batch = tokenizer(SOURCES, return_tensors="pt", padding=True, return_token_type_ids=False)
    greedy = model.generate(
        **batch,
        num_beams=1,
        max_new_tokens=8,
        min_new_tokens=8,
        return_dict_in_generate=True,
        output_scores=True,
    )
    beam = model.generate(
        **batch,
        num_beams=3,
        max_new_tokens=8,
        early_stopping=True,
        return_dict_in_generate=True,
        output_scores=True,
    )
    return {
        "greedy": greedy.sequences.tolist(),
        "greedy_scores": torch.stack(greedy.scores, 1).max(-1).values.tolist(),
        "beam": beam.sequences.tolist(),
        "beam_scores": beam.sequences_scores.tolist(),
    }


def _assert_same_decoding(got: dict, expected: dict) -> None:
    assert got["greedy"] == expected["greedy"]
    assert got["beam"] == expected["beam"]
    torch.testing.assert_close(torch.tensor(got["greedy_scores"]), torch.tensor(expected["greedy_scores"]))
    torch.testing.assert_close(torch.tensor(got["beam_scores"]), torch.tensor(expected["beam_scores"]))


# 1. A folder saved now, and one saved before the fix, decode as the package does ------------------------


def test_saved_folder_decodes_as_the_package_without_it(tmp_path, tiny_model, word_tokenizer):
    save_model_folder(tiny_model, word_tokenizer, tmp_path)
    got = run_without_package(DECODE_SCRIPT, str(tmp_path), json.dumps(SOURCES), cwd=tmp_path)
    _assert_same_decoding(got, _decode_with_package(tmp_path))


def test_folder_saved_before_the_cache_rename_is_repaired_in_place(tmp_path):
    folder = tmp_path / "model"
    shutil.copytree(OLD_FOLDER, folder)
    weights = (folder / "model.safetensors").read_bytes()
    expected = _decode_with_package(folder)
    if CACHE_FIELD == "cache":
        # The failure being repaired: under a release that passes `cache=`, the old code ignored it.
        before = run_without_package(DECODE_SCRIPT, str(folder), json.dumps(SOURCES), cwd=tmp_path)
        assert before["greedy_scores"] != expected["greedy_scores"]

    result = run_script_file("update_model_code.py", "--model", folder, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "modeling_vanilla_transformer.py" in result.stdout
    assert (folder / "model.safetensors").read_bytes() == weights  # no weight changes
    config = json.loads((folder / "config.json").read_text())
    assert config["auto_map"]["AutoModel"].endswith("TransformerModel")
    assert "langs" not in config  # no task and no report: no languages to record
    for name, source in CODE_FILES.items():
        assert (folder / name).read_text() == source.read_text()
    assert update_model_code(folder) == []  # now up to date

    got = run_without_package(DECODE_SCRIPT, str(folder), json.dumps(SOURCES), cwd=tmp_path)
    _assert_same_decoding(got, expected)


def test_update_model_code_refuses_what_is_not_a_model_folder_of_ours(tmp_path):
    with pytest.raises(FileNotFoundError, match="No model folder"):
        update_model_code(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match="no config.json"):
        update_model_code(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "marian"}))
    with pytest.raises(ValueError, match="'marian' model"):
        update_model_code(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json"]  # nothing written


def test_update_model_code_on_a_hub_repository_commits_only_the_outdated_code(tmp_path, monkeypatch):
    """The Hub is unreachable here: a stand-in answers the download and records the commit."""
    import huggingface_hub

    commits = []

    def fake_snapshot_download(repo_id, local_dir, allow_patterns, token=None):
        for name in allow_patterns:
            if (OLD_FOLDER / name).exists():
                shutil.copyfile(OLD_FOLDER / name, Path(local_dir) / name)
        return local_dir

    class FakeApi:
        def __init__(self, token=None):
            pass

        def create_commit(self, repo_id, operations, commit_message):
            commits.append((repo_id, sorted(op.path_in_repo for op in operations)))

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot_download)
    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    from hf_vanilla_transformer.interop.updates import update_hub_model_code

    outdated = [*outdated_code_files(OLD_FOLDER), "config.json"]  # its auto_map lacks AutoModel
    assert "modeling_vanilla_transformer.py" in outdated
    assert update_hub_model_code("someone/model", dry_run=True) == outdated
    assert commits == []
    update_hub_model_code("someone/model")
    assert commits == [("someone/model", sorted(outdated))]


def test_update_model_code_writes_the_generation_config_as_transformers_v5_does(
    tmp_path, tiny_model, word_tokenizer
):
    """Earlier transformers releases wrote every default into generation_config.json; v5 writes what differs.
    The repair drops the defaults and keeps the folder's decoding (beam 4, length penalty 0.6, max_length)."""
    save_model_folder(tiny_model, word_tokenizer, tmp_path)
    assert update_model_code(tmp_path) == []  # a folder this version saves is written as v5 writes it
    generation_file = tmp_path / "generation_config.json"
    saved = json.loads(generation_file.read_text())
    assert (saved["num_beams"], saved["length_penalty"], saved["early_stopping"]) == (4, 0.6, True)
    old_defaults = {"do_sample": False, "top_k": 50, "temperature": 1.0, "min_length": 0, "top_p": 1.0}
    generation_file.write_text(json.dumps({**saved, **old_defaults}))
    assert update_model_code(tmp_path, dry_run=True) == ["generation_config.json"]
    assert json.loads(generation_file.read_text()) == {**saved, **old_defaults}  # a dry run writes nothing
    assert update_model_code(tmp_path) == ["generation_config.json"]
    assert json.loads(generation_file.read_text()) == saved


def test_update_model_code_records_a_translation_folders_languages_from_its_reports(
    tmp_path, tiny_model, word_tokenizer
):
    """A translation folder saved before configs recorded `langs` gets them from its evaluation report, so
    that its pipeline splits texts by the source language's rules; a folder without a report is left alone."""
    tiny_model.config.task = "translation"
    save_model_folder(tiny_model, word_tokenizer, tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["langs"] is None
    assert update_model_code(tmp_path) == []  # nothing names its languages
    report = {"data": {"task": "translation", "source_lang": "de", "target_lang": "en"}, "metrics": {}}
    (tmp_path / "eval-test-greedy.json").write_text(json.dumps(report))
    assert update_model_code(tmp_path) == ["config.json"]
    assert AutoConfig.from_pretrained(tmp_path).langs == ["de", "en"]
    assert update_model_code(tmp_path) == []


# 2. Both names of the cache, and no keyword silently dropped --------------------------------------------


def test_cache_is_accepted_under_either_name_and_returned_under_the_installed_one(tiny_model, padded_batch):
    decoder_input_ids = torch.tensor([[1, 5, 6]] * 3)
    with torch.no_grad():
        full = tiny_model(**padded_batch, decoder_input_ids=decoder_input_ids).logits
        prefix = tiny_model(**padded_batch, decoder_input_ids=decoder_input_ids[:, :2], use_cache=True)
        cache = getattr(prefix, CACHE_FIELD)
        assert isinstance(cache, EncoderDecoderCache)
        for name in ("cache", "past_key_values"):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                step = tiny_model(
                    **padded_batch,
                    decoder_input_ids=decoder_input_ids[:, 2:],
                    use_cache=True,
                    **{name: copy.deepcopy(cache)},
                )
            torch.testing.assert_close(step.logits[:, -1], full[:, -1], atol=1e-5, rtol=0)
            assert getattr(step, CACHE_FIELD).get_seq_length() == 3
            # The old name warns where transformers renamed it (5.24 on), as its own models do.
            deprecated = [w for w in caught if "`past_key_values` is deprecated" in str(w.message)]
            assert len(deprecated) == (name == "past_key_values" and CACHE_FIELD == "cache")
    with pytest.raises(TypeError, match="both `cache` and `past_key_values`"):
        tiny_model(**padded_batch, decoder_input_ids=decoder_input_ids, cache=cache, past_key_values=cache)


@pytest.mark.parametrize("model_part", ["model", "bare model"])
def test_unknown_keyword_arguments_are_an_error_not_ignored(tiny_model, padded_batch, model_part):
    model = tiny_model if model_part == "model" else tiny_model.model
    with pytest.raises(TypeError, match="does not use: past_key_value, position_bias"):
        model(
            **padded_batch, decoder_input_ids=padded_batch["input_ids"], past_key_value=None, position_bias=1
        )


def test_generate_with_an_unknown_keyword_fails_loudly(tiny_model, padded_batch):
    with pytest.raises((TypeError, ValueError), match="decoder_lenght"):
        tiny_model.generate(**padded_batch, max_new_tokens=3, decoder_lenght=3)


def test_ordinary_use_prints_no_deprecation_warning(tiny_model, padded_batch, caplog):
    """Under either release: a forward with labels, cached steps, greedy and beam search, resize."""
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.WARNING):
        warnings.simplefilter("always")
        labels = torch.tensor([[5, 6, 2]] * 3)
        tiny_model(**padded_batch, labels=labels).loss.item()
        tiny_model.generate(**padded_batch, num_beams=1, max_new_tokens=4)
        tiny_model.generate(**padded_batch, num_beams=2, max_new_tokens=4)
        out = tiny_model(**padded_batch, decoder_input_ids=labels[:, :1], use_cache=True)
        tiny_model(**padded_batch, decoder_input_ids=labels[:, 1:2], cache=getattr(out, CACHE_FIELD))
    messages = [str(w.message) for w in caught] + [record.getMessage() for record in caplog.records]
    assert not [m for m in messages if "deprecat" in m.lower()], messages


# 3. What the traveling code relies on that transformers does not promise -------------------------------


def test_configuration_checks_fields_after_construction_and_saves_no_flag_of_its_own(tmp_path):
    """The configuration is a `@strict` dataclass: its checks come with the class, copies and reloads
    included, and nothing of them is saved."""
    config = VanillaTransformerConfig.from_preset("transformer-tiny")
    with pytest.raises(StrictDataclassFieldValidationError, match="dropout"):
        config.dropout = 1.5
    with pytest.raises(StrictDataclassFieldValidationError, match="dropout"):
        copy.deepcopy(config).dropout = 1.5
    config.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert not [key for key in saved if "check" in key or key.startswith("_")]
    with pytest.raises(StrictDataclassFieldValidationError, match="dropout"):
        VanillaTransformerConfig.from_pretrained(tmp_path).dropout = 1.5
