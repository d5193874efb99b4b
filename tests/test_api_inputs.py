"""The Python API answers empty and incomplete inputs as the commands do: an exception that names what was
wrong and the fix, or a documented result (no texts give no outputs, a blank source an empty output), never a
traceback from deep inside torch or tokenizers, nor an output made up from nothing. The shipped models, each
loaded once: the pipeline as the README uses it (`trust_remote_code=True`, the folder's own pipeline code),
the model and the package's helpers from Python, and folders with a file missing."""

import logging
import os
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForSeq2SeqLM, pipeline

from hf_vanilla_transformer import PIPELINE_TASK
from hf_vanilla_transformer.decoding.generation import generate_documents, generate_texts
from hf_vanilla_transformer.errors import InputTypeError, MissingPathError, UsageError
from hf_vanilla_transformer.metrics import binomial_standard_error, check_pairs, exact_match
from hf_vanilla_transformer.saving import load_model_folder, save_model_folder
from hf_vanilla_transformer.tasks.registry import get_task, task_or_plain
from hf_vanilla_transformer.tokenization import load_tokenizer, train_bpe_tokenizer

CARDS = Path(__file__).resolve().parents[1] / "model_cards"
# Each shipped model and an input its model takes.
SHIPPED = {
    "translation": (CARDS / "vanilla-transformer-multi30k-de-en", "Ein Hund."),
    "series": (CARDS / "vanilla-transformer-series", "exp(2*a*x)"),
}
GREEDY = {"num_beams": 1}


@pytest.fixture(scope="module", params=sorted(SHIPPED))
def shipped_pipeline(request):
    folder, good = SHIPPED[request.param]
    return pipeline(PIPELINE_TASK, model=str(folder), trust_remote_code=True, **GREEDY), good


@pytest.fixture(scope="module")
def translation():
    """The shipped translation model and its tokenizer, loaded by the package."""
    return load_model_folder(SHIPPED["translation"][0])


# (input, split_sentences, exception, what its message must say); GOOD stands for an input the model takes.
GOOD = object()
PIPELINE_REFUSALS = {
    "empty text": ("", None, ValueError, "got an empty input"),
    "white space": ("  \t ", None, ValueError, "got an empty input"),
    "byte-order mark alone": ("\ufeff", None, ValueError, "got an empty input"),
    "line breaks alone": ("\n\r\n\u2028", None, ValueError, "got an empty input"),
    "empty text, split": ("", True, ValueError, "got an empty input"),
    "line breaks, split": ("\n\n", True, ValueError, "got an empty input"),
    "an empty item": (["", GOOD], None, ValueError, r"item 0 of 2 holds no text"),
    "an empty item, whole": (["", GOOD], False, ValueError, r"item 0 of 2 holds no text"),
    "None": (None, None, TypeError, "takes a string or a list of strings, got NoneType"),
    "None in a list": ([GOOD, None], None, TypeError, r"item 1 of 2 is NoneType: pass each text as a string"),
    "an int in a list": ([7], None, TypeError, r"item 0 of 1 is int"),
}


def _with_good(value, good):
    return [good if item is GOOD else item for item in value] if isinstance(value, list) else value


@pytest.mark.parametrize("case", PIPELINE_REFUSALS)
def test_pipeline_refuses_what_holds_no_text_naming_it(shipped_pipeline, case):
    pipe, good = shipped_pipeline
    value, split, error, message = PIPELINE_REFUSALS[case]
    settings = {} if split is None else {"split_sentences": split}
    with pytest.raises(error, match=message):
        pipe(_with_good(value, good), **settings)


@pytest.mark.parametrize("split", [None, True, False])
def test_pipeline_gives_no_outputs_for_no_texts(shipped_pipeline, split):
    pipe, _ = shipped_pipeline
    settings = {} if split is None else {"split_sentences": split}
    assert pipe([], **settings) == []
    assert pipe([], batch_size=2, **settings) == []


# (generate() keyword arguments, exception, what its message must say), on the translation model; ids
# (batch, length) of the model's vocabulary of 8000 where not the point.
IDS = torch.tensor([[137, 330, 2], [254, 2, 0]])
MASK = torch.tensor([[1, 1, 1], [1, 1, 0]])
GENERATE_REFUSALS = {
    "no input at all": ({}, ValueError, r"generate\(\) got no source: pass input_ids"),
    "no rows": ({"input_ids": torch.empty(0, 0, dtype=torch.long)}, ValueError, r"shape \(0, 0\), no token"),
    "rows of no token": (
        {"input_ids": torch.empty(2, 0, dtype=torch.long)},
        ValueError,
        r"\(2, 0\), no token",
    ),
    "a row the mask empties": (
        {"input_ids": IDS, "attention_mask": torch.tensor([[1, 1, 1], [0, 0, 0]])},
        ValueError,
        "attention_mask row 1 is all zeros",
    ),
    "ids without a batch dimension": (
        {"input_ids": IDS[0]},
        ValueError,
        r"input_ids must have shape \(batch_size, sequence_length\), got \(3,\)",
    ),
    "float ids": ({"input_ids": IDS.float()}, TypeError, "input_ids must hold integer token ids"),
    "an id past the vocabulary": (
        {"input_ids": torch.tensor([[8000, 2]])},
        ValueError,
        r"input_ids holds token id 8000, outside the model's vocabulary of 8000 ids",
    ),
    "a negative id": ({"input_ids": torch.tensor([[-1, 2]])}, ValueError, "token id -1, outside"),
}


@pytest.mark.parametrize("case", GENERATE_REFUSALS)
def test_generate_refuses_an_empty_or_malformed_source_naming_it(translation, case):
    model, _ = translation
    inputs, error, message = GENERATE_REFUSALS[case]
    with pytest.raises(error, match=message):
        model.generate(**inputs, **GREEDY, max_new_tokens=3)


FORWARD_REFUSALS = {
    "labels of another batch size": (
        {"input_ids": IDS, "attention_mask": MASK, "labels": torch.tensor([[5, 2]])},
        r"has 1 rows but the source \(input_ids\) has 2: give one target sequence per source",
    ),
    "decoder ids of another batch size": (
        {"input_ids": IDS, "decoder_input_ids": torch.tensor([[1], [1], [1]])},
        "has 3 rows but the source",
    ),
    # Ids past the vocabulary are refused by `generate()` (above), once per call; `forward` reads only the
    # shapes, since reading the values would wait for the device in every training step.
    "labels of no token": ({"input_ids": IDS, "labels": torch.empty(2, 0, dtype=torch.long)}, "no token"),
    "a mask of another shape": (
        {"input_ids": IDS, "attention_mask": MASK[:, :2], "decoder_input_ids": torch.tensor([[1], [1]])},
        r"attention_mask has shape \(2, 2\) but input_ids \(2, 3\)",
    ),
}


@pytest.mark.parametrize("case", FORWARD_REFUSALS)
def test_forward_refuses_inputs_that_do_not_fit_naming_them(translation, case):
    model, _ = translation
    inputs, message = FORWARD_REFUSALS[case]
    with pytest.raises(ValueError, match=message), torch.no_grad():
        model(**inputs)


def test_forward_still_takes_a_fully_padded_row_and_labels_it_ignores(translation):
    """What the refusals leave alone: a padded batch's empty row (tests/test_modeling.py checks it stays
    finite) and -100 labels."""
    model, _ = translation
    with torch.no_grad():
        out = model(
            input_ids=IDS,
            attention_mask=torch.tensor([[1, 1, 1], [0, 0, 0]]),
            labels=torch.tensor([[5, 2], [-100, -100]]),
        )
    assert torch.isfinite(out.loss)


def test_generate_texts_answers_no_and_blank_sources_as_translate_does(translation):
    model, tokenizer = translation
    assert generate_texts(model, tokenizer, [], 4, GREEDY) == []
    # A blank line gives a blank line, as in scripts/translate.py: not a sentence made up from nothing.
    outputs = generate_texts(model, tokenizer, ["  ", "Ein Hund.", ""], 4, GREEDY)
    assert outputs[0] == outputs[2] == "" and outputs[1].startswith("A dog")
    assert generate_documents(model, tokenizer, ["", "\n\n"], 4, GREEDY, ["de", "en"]) == ["", "\n\n"]


TEXTS_REFUSALS = {
    "one string, read as its characters": ("Ein Hund.", InputTypeError, "sources is one string"),
    "None among the texts": (["Ein Hund.", None], InputTypeError, r"sources\[1\] is NoneType, not a text"),
}


@pytest.mark.parametrize("case", TEXTS_REFUSALS)
def test_generate_texts_refuses_what_is_no_list_of_texts(translation, case):
    model, tokenizer = translation
    sources, error, message = TEXTS_REFUSALS[case]
    with pytest.raises(error, match=message):
        generate_texts(model, tokenizer, sources, 4, GREEDY)
    with pytest.raises(error, match=message.replace("sources", "texts")):
        generate_documents(model, tokenizer, sources, 4, GREEDY, ["de", "en"])


def test_generate_texts_refuses_a_batch_of_nothing(translation):
    model, tokenizer = translation
    with pytest.raises(UsageError, match="batch_size=0: a batch holds at least one input"):
        generate_texts(model, tokenizer, ["Ein Hund."], 0, GREEDY)


# (call, exception, what its message must say): the metrics and the tasks' scores.
SCORE_REFUSALS = {
    "pairs of zero examples": (lambda: check_pairs([], [], "BLEU"), UsageError, "got no predictions: BLEU"),
    "pairs of unequal lists": (lambda: check_pairs(["a"], [], "BLEU"), UsageError, "1 predictions but 0"),
    "pairs of None": (lambda: check_pairs(None, None, "BLEU"), InputTypeError, "predictions is NoneType"),
    "pairs of one string each": (
        lambda: check_pairs("ab", "ac", "BLEU"),
        InputTypeError,
        "predictions is str",
    ),
    "exact match of lists": (lambda: exact_match(["a"], ["a"]), InputTypeError, "two strings; got list"),
    "exact match of None": (lambda: exact_match(None, "x"), InputTypeError, "got NoneType and str"),
    "a proportion above 1": (lambda: binomial_standard_error(1.5, 3), UsageError, "proportion=1.5"),
    "translation score of zero examples": (
        lambda: get_task("translation").score([], []),
        UsageError,
        "got no predictions: exact match over zero examples",
    ),
    "translation score of several references each": (
        lambda: get_task("translation").score(["A dog."], [["A dog.", "The dog."]]),
        InputTypeError,
        "one reference string each",
    ),
    "series score of unequal lists": (
        lambda: get_task("series").score(["x + O(x**6)"], []),
        UsageError,
        "got 1 predictions but 0 references",
    ),
    "exact match of unequal lists": (
        lambda: task_or_plain("not-installed").score(["a", "b"], ["a"]),
        UsageError,
        "got 2 predictions but 1 references",
    ),
}


@pytest.mark.parametrize("case", SCORE_REFUSALS)
def test_scores_refuse_no_or_unpaired_predictions(case):
    call, error, message = SCORE_REFUSALS[case]
    with pytest.raises(error, match=message):
        call()


def test_series_helpers_refuse_an_empty_expression():
    from hf_vanilla_transformer.tasks.series.expansion import taylor_series
    from hf_vanilla_transformer.tasks.series.grammar import check_model_input

    for empty in ("", "   "):
        with pytest.raises(ValueError, match="expression is empty"):
            taylor_series(empty)
        with pytest.raises(ValueError, match="expression is empty. The model's grammar"):
            check_model_input(empty)


def test_a_tokenizer_is_not_trained_on_nothing():
    for corpus in (iter([]), iter(["", "  "])):
        with pytest.raises(UsageError, match="The training corpus is empty"):
            train_bpe_tokenizer(corpus, 200, show_progress=False)
    with pytest.raises(UsageError, match="No corpus files given"):
        train_bpe_tokenizer([], 200, show_progress=False)


def _folder_without(tmp_path: Path, name: str, *missing: str) -> Path:
    """The shipped series model's folder, its files linked (not copied), but for `missing` (glob patterns)."""
    source = SHIPPED["series"][0]
    folder = tmp_path / name
    folder.mkdir()
    for path in source.iterdir():
        if not any(path.match(pattern) for pattern in missing):
            os.symlink(path, folder / path.name)
    return folder


# (files left out, exception, what its message must say), through load_model_folder.
INCOMPLETE_FOLDERS = {
    "no weights": (("*.safetensors",), MissingPathError, "has a config.json but no weights"),
    "no config": (("config.json",), MissingPathError, "a folder without config.json"),
    "no tokenizer files": (("tokenizer*.json",), MissingPathError, "holds no tokenizer"),
    "no tokenizer.json": (("tokenizer.json",), MissingPathError, "holds no tokenizer"),
}


@pytest.mark.parametrize("case", INCOMPLETE_FOLDERS)
def test_an_incomplete_folder_is_named_with_what_it_lacks(tmp_path, case):
    missing, error, message = INCOMPLETE_FOLDERS[case]
    folder = _folder_without(tmp_path, case.replace(" ", "_"), *missing)
    with pytest.raises(error, match=message):
        load_model_folder(folder)


def test_a_folder_without_its_generation_config_loads_and_says_how_it_decodes(tmp_path, caplog):
    folder = _folder_without(tmp_path, "no_generation_config", "generation_config.json")
    with caplog.at_level(logging.WARNING, logger="hf_vanilla_transformer.saving"):
        model, tokenizer = load_model_folder(folder)
    assert "has no generation_config.json" in caplog.text and "greedy" in caplog.text
    assert AutoModelForSeq2SeqLM.from_pretrained(folder).can_generate()
    ids = model.generate(**tokenizer(["exp(2*a*x)"], return_tensors="pt"), max_new_tokens=4)
    assert ids.shape[0] == 1


def test_load_tokenizer_names_a_folder_without_a_vocabulary(tmp_path):
    folder = _folder_without(tmp_path, "config_only", "tokenizer.json")
    with pytest.raises(MissingPathError, match="holds no tokenizer"):
        load_tokenizer(folder)


PATH_REFUSALS = {
    "an empty path": ("", UsageError, r"The model folder to load is an empty path \(''\)"),
    "None": (None, InputTypeError, "The model folder to load is NoneType, not a path"),
}


@pytest.mark.parametrize("case", PATH_REFUSALS)
def test_load_model_folder_refuses_what_names_no_folder(case):
    path, error, message = PATH_REFUSALS[case]
    with pytest.raises(error, match=message):
        load_model_folder(path)


def test_save_model_folder_refuses_an_empty_folder_name_or_a_missing_tokenizer(
    translation, tmp_path, monkeypatch
):
    model, tokenizer = translation
    monkeypatch.chdir(tmp_path)  # where "" would have saved
    with pytest.raises(UsageError, match="folder='' names no folder"):
        save_model_folder(model, tokenizer, "")
    assert not any(tmp_path.iterdir())
    with pytest.raises(InputTypeError, match="tokenizer is NoneType, not a tokenizer"):
        save_model_folder(model, None, tmp_path / "out")
    with pytest.raises(InputTypeError, match="model is NoneType, not a transformers model"):
        save_model_folder(None, tokenizer, tmp_path / "out")
