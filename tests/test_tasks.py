"""The task objects: what differs between translation and series, the data checks done before training, and
where a model is looked for."""

import json
import logging
import shutil
from pathlib import Path

import pytest
from datasets import Dataset, DatasetDict
from transformers import AutoModelForSeq2SeqLM

from hf_vanilla_transformer.errors import MissingPathError, UsageError
from hf_vanilla_transformer.evaluation.scoring import EvaluationArguments, evaluate_model, report_path
from hf_vanilla_transformer.saving import (
    check_model_location,
    check_tokenizer_location,
    is_local_path,
    model_task,
)
from hf_vanilla_transformer.tasks import DataArguments, get_task, prepare_dataset
from hf_vanilla_transformer.tasks.series.sampling import iter_candidates
from hf_vanilla_transformer.tasks.series.tokenizer import train_series_tokenizer
from hf_vanilla_transformer.tasks.translation.data import load_parallel_text, load_translation_dataset
from hf_vanilla_transformer.tokenization import train_bpe_tokenizer

from .script_runner import run_script_file

FIXTURE = Path(__file__).parent / "fixtures" / "multi30k"


@pytest.fixture(scope="module")
def multi30k(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("multi30k") / "data"
    load_parallel_text(FIXTURE, "de", "en").save_to_disk(folder)
    return folder


@pytest.fixture(scope="module")
def series_tokenizer_dir(tmp_path_factory) -> Path:
    """A series BPE tokenizer as the recipes train it: on expressions (and series) only."""
    folder = tmp_path_factory.mktemp("series-tokenizer")
    expressions = [next(stream) for stream in [iter_candidates(0)] for _ in range(2000)]
    train_series_tokenizer(iter(expressions), vocab_size=300, show_progress=False, output_dir=folder)
    return folder


@pytest.fixture(scope="module")
def translation_tokenizer_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("translation-tokenizer")
    train_bpe_tokenizer(
        [FIXTURE / "train.de.gz", FIXTURE / "train.en.gz"],
        vocab_size=400,
        show_progress=False,
        output_dir=folder,
    )
    return folder


def test_each_task_names_its_columns_metric_and_defaults():
    translation, series = get_task("translation"), get_task("series")
    args = DataArguments(task="translation").with_options(source_lang="en", target_lang="de")
    assert translation.text_fields(args.options) == (("translation", "en"), ("translation", "de"))
    assert series.text_fields(series.default_options()) == (("expression", None), ("series", None))
    assert (translation.best_metric, series.best_metric) == ("bleu", "exact_match")
    assert (translation.output_length_from_config, series.output_length_from_config) == (False, True)
    assert series.row_formats and not translation.row_formats
    assert translation.splits_into_sentences and not series.splits_into_sentences
    with pytest.raises(ValueError, match="single digits already"):
        series.options(integer_digits=True, tutorial_vocabulary=True)


def test_unknown_task_and_misplaced_options_are_refused():
    # Installed: the package's tasks (and any task file an earlier test of this process imported).
    with pytest.raises(
        ValueError, match=r"Unknown task 'summarization'; installed: (\w+, )*series, translation"
    ):
        get_task("summarization")
    with pytest.raises(ValueError, match="Unknown task"):
        DataArguments(task="summarization")
    with pytest.raises(ValueError, match=r"max_unknown_token_share.*\[0, 1\]"):
        DataArguments(max_unknown_token_share=1.5)
    with pytest.raises(ValueError, match=r"--task .*series or translation"):
        _ = DataArguments().task_spec


def test_a_task_options_of_another_task_are_refused_on_the_command_line(tmp_path):
    """Only the chosen task's options are parsed; one of another task is refused in one line, as it is
    parsed, even at its default value; one of no task gets the closest real one."""
    from hf_vanilla_transformer.cli import make_parser, parse_dataclasses

    def parse(*args):
        return parse_dataclasses(make_parser(DataArguments, args=list(args)), list(args))

    (args,) = parse("--task", "series", "--symbol_renamings", "2")
    assert args.options.symbol_renamings == 2
    (args,) = parse("--task", "translation", "--source_lang", "fr", "--split-punctuation")
    assert args.options.source_lang == "fr" and args.options.split_punctuation
    for value in ("2", "0"):
        with pytest.raises(ValueError, match="^`symbol_renamings` applies to the series task only; drop it"):
            parse("--task", "translation", "--symbol_renamings", value)
    with pytest.raises(ValueError, match="`symbol_renamings` applies to the series task only"):
        parse("--task", "translation", "--symbol-renamings=2")
    with pytest.raises(ValueError, match=r"--symbol_renamings must be at least 0, got -1"):
        parse("--task", "series", "--symbol_renamings", "-1")
    with pytest.raises(ValueError, match=r"--source_lagn \(did you mean --source_lang\?\)"):
        parse("--task", "translation", "--source_lagn", "fr")


SERIES_MODEL = str(Path(__file__).resolve().parents[1] / "model_cards" / "vanilla-transformer-series")


@pytest.mark.parametrize(
    "script, options",
    [
        ("train.py", ["--task", "series"]),
        ("train_accelerate.py", ["--task", "series"]),
        ("benchmarks/profile_training.py", ["--task", "series"]),
        ("evaluate_model.py", ["--task", "series", "--model", "m"]),
        ("evaluate_model.py", ["--model", SERIES_MODEL, "--dataset", "d"]),  # the task is the model's
        ("benchmarks/quality_curve.py", ["--task", "series", "--run_dir", "run"]),
        ("train_tokenizer.py", ["--task", "series", "--output_dir", "tokenizer"]),
        ("prepare_data.py", ["--task", "series", "--output_dir", "data"]),
    ],
)
def test_every_command_refuses_another_tasks_option_in_the_same_words(tmp_path, script, options):
    """`--source_lang` for a series task: refused by every command that takes a task, in one line and one
    wording, before any work (an evaluation as soon as its model names the task)."""
    result = run_script_file(script, *options, "--source_lang", "fr", cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-3000:]
    assert result.stderr.splitlines() == [
        "error: `source_lang` applies to the translation task only; drop it for task 'series'."
    ]
    assert not list(tmp_path.iterdir())


def _translation_args(data: Path, tokenizer: Path, source_lang: str = "de", **overrides) -> DataArguments:
    options = dict(task="translation", dataset=str(data), tokenizer=str(tokenizer), max_source_length=128,
                   max_target_length=128)  # fmt: skip
    return DataArguments(**{**options, **overrides}).with_options(source_lang=source_lang)


def test_a_fitting_tokenizer_trains_without_a_word(multi30k, translation_tokenizer_dir, caplog):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(translation_tokenizer_dir)
    with caplog.at_level(logging.WARNING, logger="hf_vanilla_transformer.tasks"):
        tokenized = prepare_dataset(_translation_args(multi30k, translation_tokenizer_dir), tokenizer)
    assert tokenized["train"].num_rows > 0
    assert not [r for r in caplog.records if r.name == "hf_vanilla_transformer.tasks"]


def test_a_tokenizer_for_other_data_is_caught_before_training(multi30k, series_tokenizer_dir, caplog):
    """The series tokenizer on German and English: umlauts become <unk> and its merges do not apply, so every
    sentence is spelled out character by character."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(series_tokenizer_dir)
    args = _translation_args(multi30k, series_tokenizer_dir, max_unknown_token_share=0.001)
    with pytest.raises(ValueError) as refused:
        prepare_dataset(args, tokenizer)
    message = str(refused.value)
    assert "are the unknown token '<unk>'" in message and str(series_tokenizer_dir) in message
    assert (
        "max_unknown_token_share=0.001" in message
        and "scripts/train_tokenizer.py --task translation" in message
    )

    with caplog.at_level(logging.WARNING, logger="hf_vanilla_transformer.tasks"):
        prepare_dataset(
            _translation_args(multi30k, series_tokenizer_dir, max_unknown_token_share=1.0), tokenizer
        )
    warnings = " ".join(
        r.getMessage() for r in caplog.records if r.name.startswith("hf_vanilla_transformer.tasks")
    )
    assert "its merges do not apply" in warnings and str(series_tokenizer_dir) in warnings


def test_unknown_tokens_above_the_share_are_refused(tmp_path, translation_tokenizer_dir):
    """A corpus in a script the tokenizer never saw: nearly every token is <unk>."""
    from transformers import AutoTokenizer

    greek = {"translation": [{"de": "Ένας σκύλος τρέχει", "en": "Ένας σκύλος τρέχει"}] * 20}
    DatasetDict(train=Dataset.from_dict(greek)).save_to_disk(tmp_path / "data")
    tokenizer = AutoTokenizer.from_pretrained(translation_tokenizer_dir)
    with pytest.raises(ValueError, match=r"\d+\.\d% of the tokens of 20 pairs .* are the unknown token"):
        prepare_dataset(_translation_args(tmp_path / "data", translation_tokenizer_dir), tokenizer)


def test_translation_data_with_one_column_per_language_loads_for_training(tmp_path):
    """bentrevett/multi30k's schema (columns `en`, `de`) is packed into the `translation` column."""
    flat = {"en": ["A dog runs.", "Two cats."], "de": ["Ein Hund rennt.", "Zwei Katzen."]}
    DatasetDict(train=Dataset.from_dict(flat)).save_to_disk(tmp_path / "data")
    raw = _translation_args(tmp_path / "data", "unused").load_raw()
    assert raw["train"]["translation"] == [
        {"de": "Ein Hund rennt.", "en": "A dog runs."},
        {"de": "Zwei Katzen.", "en": "Two cats."},
    ]
    with pytest.raises(ValueError, match=r"Columns found: en, de\."):
        _translation_args(tmp_path / "data", "unused", source_lang="fr").load_raw()


@pytest.mark.parametrize("location", ["/nonexistent", "./outputs/nothing-here", "a/b/c"])
def test_evaluating_a_missing_model_folder_says_so(location, multi30k):
    args = _translation_args(multi30k, "unused")
    with pytest.raises(FileNotFoundError, match=f"No model folder at {location}"):
        evaluate_model(EvaluationArguments(model=location), args)


def test_evaluating_a_folder_that_is_not_a_model_says_so(tmp_path, multi30k):
    with pytest.raises(FileNotFoundError, match="without config.json"):
        evaluate_model(EvaluationArguments(model=str(tmp_path)), _translation_args(multi30k, "unused"))


def test_evaluate_script_names_the_missing_folder(tmp_path):
    result = run_script_file("evaluate_model.py", "--model", "/nonexistent", "--task", "series", cwd=tmp_path)
    assert result.returncode == 2
    assert "No model folder at /nonexistent" in result.stderr and "Repo id" not in result.stderr


def test_a_mistyped_folder_under_an_existing_one_is_local_with_the_nearest_name(tmp_path, monkeypatch):
    """`model_cards/vanilla-transformer-seris` has one slash, like a Hub id, but its first component is a
    folder here: it is a missing local folder, answered at once with the nearest existing name."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "model_cards" / "vanilla-transformer-series").mkdir(parents=True)
    (tmp_path / "data" / "multi30k-de-en").mkdir(parents=True)
    assert is_local_path("model_cards/vanilla-transformer-seris") and not is_local_path("someone/model")
    with pytest.raises(FileNotFoundError) as error:
        check_model_location("model_cards/vanilla-transformer-seris")
    assert str(error.value) == (
        "No model folder at model_cards/vanilla-transformer-seris. Did you mean "
        "model_cards/vanilla-transformer-series?"
    )
    with pytest.raises(
        FileNotFoundError, match=r"No model folder at model_cards/other\. Pass a folder written"
    ):
        check_model_location("model_cards/other")
    with pytest.raises(
        FileNotFoundError, match=r"'data/multi30k-de' is not a dataset folder\. Did you mean "
    ):
        load_translation_dataset("data/multi30k-de", languages=("de", "en"))
    # a tokenizer the same way, and a path from the home folder is local even when it is missing
    with pytest.raises(FileNotFoundError) as error:
        check_tokenizer_location("data/multi30k-de-eng")
    assert str(error.value).endswith("multi30k-de-eng. Did you mean data/multi30k-de-en?")
    assert is_local_path("~/models/mine")
    with pytest.raises(FileNotFoundError, match=r"^No model folder at ~/no-such-model-folder\."):
        check_model_location("~/no-such-model-folder")


def test_an_unreachable_hub_id_fails_at_once_in_one_line_unless_cached(monkeypatch):
    import huggingface_hub

    from hf_vanilla_transformer import saving

    def refuse(*args, **kwargs):
        raise OSError("[Errno -2] Name or service not known")

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(saving.socket, "create_connection", refuse)
    with pytest.raises(OSError) as error:
        check_model_location("someone/model")
    assert str(error.value) == (
        "Cannot reach huggingface.co to download 'someone/model', and it is not in the Hub cache ([Errno -2] "
        "Name or service not known). Connect, or pass a local folder."
    )
    # A repository in the Hub cache loads from there: nothing is refused.
    monkeypatch.setattr(
        huggingface_hub, "try_to_load_from_cache", lambda *args, **kwargs: "/cache/config.json"
    )
    check_model_location("someone/model")
    # Offline by choice, a name the cache lacks is refused without trying the network.
    monkeypatch.setattr(huggingface_hub, "try_to_load_from_cache", lambda *args, **kwargs: None)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(OSError) as error:
        check_model_location("someone/model")
    assert str(error.value) == (
        "HF_HUB_OFFLINE is set and 'someone/model' is not in the Hub cache. Unset HF_HUB_OFFLINE to download "
        "it, or pass a local folder."
    )


def test_a_hub_dataset_that_cannot_be_reached_fails_in_one_line():
    # the suite runs with HF_HUB_OFFLINE=1, and no test dataset of this name is in any cache
    with pytest.raises(OSError, match=r"^Cannot load the Hub dataset 'someone/no-such-dataset' \(") as error:
        load_translation_dataset("someone/no-such-dataset", languages=("de", "en"))
    assert "pass a local dataset folder" in str(error.value) and "\n" not in str(error.value)


def test_a_model_given_for_another_task_is_refused_naming_both(multi30k, tmp_path):
    series = Path(__file__).resolve().parents[1] / "model_cards" / "vanilla-transformer-series"
    with pytest.raises(
        ValueError, match="is a series model, not a translation one: give --task series, or a"
    ):
        evaluate_model(
            EvaluationArguments(model=str(series), max_examples=2), _translation_args(multi30k, "x")
        )
    # A folder saved before configs recorded the task: the task of the reports it carries.
    old = tmp_path / "old-series"
    shutil.copytree(series, old)
    config = json.loads((old / "config.json").read_text())
    del config["task"]
    (old / "config.json").write_text(json.dumps(config))
    model = AutoModelForSeq2SeqLM.from_pretrained(old)
    assert model.config.task is None and model_task(model, old) == "series"
    (old / "eval-test-greedy.json").unlink()
    (old / "eval-test-beam4-lp0.6.json").unlink()
    assert model_task(model, old) is None  # unknown: nothing is refused


@pytest.mark.parametrize("name", ["series", "translation"])
def test_each_task_holds_what_the_tools_ask_of_it(name, tmp_path):
    """The demo page, the attention plot, the pipeline and the data errors ask the task object, never its
    name: its examples pass its own input check; an empty folder is refused, naming the script that fills
    it."""
    task = get_task(name)
    assert task.input_label and task.input_hint and task.demo_examples
    for example in task.demo_examples:
        task.check_input(example)
    with pytest.raises(
        MissingPathError, match=r"Make one with `python scripts/(prepare_translation|generate_series)"
    ):
        task.load_prepared(tmp_path)
    assert task.data_made_by.startswith("python scripts/")


def test_only_the_series_task_refuses_input_outside_a_grammar():
    with pytest.raises(UsageError, match="log"):
        get_task("series").check_input("log(x)")
    get_task("translation").check_input("log(x)")  # a sentence may be anything
    assert get_task("series").expands_with_cas and not get_task("translation").expands_with_cas


def test_evaluation_without_a_task_evaluates_the_model_for_its_own(
    tmp_path, multi30k, translation_tokenizer_dir
):
    """`evaluate_model.py` without --task reads the model's task; a model that names none translates."""
    import json

    from transformers import AutoTokenizer

    from hf_vanilla_transformer import VanillaTransformerConfig, VanillaTransformerForConditionalGeneration
    from hf_vanilla_transformer.saving import save_model_folder
    from hf_vanilla_transformer.tasks import DatasetArguments

    tokenizer = AutoTokenizer.from_pretrained(translation_tokenizer_dir)
    config = VanillaTransformerConfig.from_preset(
        "transformer-tiny", vocab_size=len(tokenizer), task="translation"
    )
    folder = save_model_folder(
        VanillaTransformerForConditionalGeneration(config), tokenizer, tmp_path / "model"
    )
    args = DatasetArguments(dataset=str(multi30k))
    assert args.task is None
    report = evaluate_model(
        EvaluationArguments(model=str(folder), split="test", max_examples=3, num_beams=1, max_new_tokens=3),
        args,
    )
    assert args.task == "translation" and "bleu" in report["metrics"]
    assert json.loads(next(folder.glob("eval-*.json")).read_text())["data"]["task"] == "translation"


SHIPPED = Path(__file__).resolve().parents[1] / "model_cards"


def test_evaluation_of_paragraphs_translates_each_as_its_sentences(tmp_path, multi30k):
    """`--sentences_per_text 3`: every 3 consecutive examples are one text, sources and references joined; the
    shipped model's prediction for a text is its sentences' predictions joined, as the pipeline gives it.
    Given whole, the text decodes otherwise. A series model's examples are no sentences, and are refused."""
    folder = SHIPPED / "vanilla-transformer-multi30k-de-en"

    def evaluate(name: str, **options) -> dict:
        options = dict(model=str(folder), split="test", max_examples=6, num_beams=1, **options)
        return evaluate_model(
            EvaluationArguments(**options, output_file=str(tmp_path / name)), DataArguments(
                task="translation", dataset=str(multi30k))
        )  # fmt: skip

    sentences = evaluate("sentences.json")
    texts = evaluate("texts.json", sentences_per_text=3)
    whole = evaluate("whole.json", sentences_per_text=3, split_sentences=False)
    one_by_one = [example["prediction"] for example in sentences["examples"]]
    assert [example["prediction"] for example in texts["examples"]] == [
        " ".join(one_by_one[:3]),
        " ".join(one_by_one[3:]),
    ]
    for key in ("source", "reference"):
        joined = [" ".join(example[key] for example in sentences["examples"][i : i + 3]) for i in (0, 3)]
        assert (
            [example[key] for example in texts["examples"]] == joined == [e[key] for e in whole["examples"]]
        )
    assert texts["num_examples"] == 2 and texts["texts"] == {"sentences_per_text": 3, "split": True}
    assert whole["texts"]["split"] is False and "texts" not in sentences
    assert whole["metrics"]["bleu"] < texts["metrics"]["bleu"]  # given whole, the model drops sentences

    # The default report names tell the three apart.
    arguments = dict(model=str(tmp_path / "model"), split="test")
    names = [
        report_path(EvaluationArguments(**arguments, **options), {"num_beams": 1}, None).name
        for options in ({}, {"sentences_per_text": 3}, {"sentences_per_text": 3, "split_sentences": False})
    ]
    assert names == [
        "eval-test-greedy.json",
        "eval-test-texts3-greedy.json",
        "eval-test-texts3-whole-greedy.json",
    ]

    with pytest.raises(UsageError, match="--split_sentences false applies to texts of several examples"):
        EvaluationArguments(model=str(folder), split_sentences=False)
    series = SHIPPED / "vanilla-transformer-series"
    with pytest.raises(UsageError, match="a series example is no sentence of a text"):
        evaluate_model(
            EvaluationArguments(model=str(series), sentences_per_text=3), DataArguments(dataset="x")
        )
