"""Evaluation: decoding settings per task, the series report breakdowns, and bad model locations."""

import pytest
import torch

from hf_vanilla_transformer.tasks import get_task


def test_evaluation_lets_series_outputs_run_to_the_models_max_length(tiny_model):
    """The translation default (source length + 50, §6.1) would cut series, which are ~3x longer than their
    expressions (in the 50k test split: targets up to 248 tokens, sources at most 16)."""
    from hf_vanilla_transformer.decoding.generation import generation_settings
    from hf_vanilla_transformer.evaluation.scoring import EvaluationArguments

    config = tiny_model.generation_config
    series = generation_settings(EvaluationArguments(model="unused"), get_task("series"), config)
    translation = generation_settings(EvaluationArguments(model="unused"), get_task("translation"), config)
    assert series["max_new_tokens"] == config.max_length == 256
    assert translation["max_new_tokens"] is None  # generate_texts applies source length + 50 per batch
    chosen = generation_settings(
        EvaluationArguments(model="unused", num_beams=1, max_new_tokens=7), get_task("series"), config
    )
    assert (chosen["num_beams"], chosen["max_new_tokens"]) == (1, 7)
    assert "length_penalty" not in chosen  # greedy has none; generate() would warn that it is ignored
    beam = generation_settings(EvaluationArguments(model="unused", num_beams=3), get_task("series"), config)
    assert (beam["num_beams"], beam["length_penalty"]) == (3, 0.6)


def test_series_exact_match_breaks_down_by_reference_length():
    from hf_vanilla_transformer.tasks.series.reports import exact_match_by_reference_length

    short, long = "x + O(x**6)", "x" * 120
    predictions = [short, "wrong", short, long]
    references = [short, short, short, long]
    bins = exact_match_by_reference_length(predictions, references, edges=(0, 50, 100, 200))
    assert [b["reference_chars"] for b in bins] == ["0-49", "100-199"]  # the empty 50-99 bin is left out
    assert (bins[0]["n"], bins[0]["exact_match"]) == (3, 2 / 3)
    assert abs(bins[0]["exact_match_stderr"] - ((2 / 3) * (1 / 3) / 3) ** 0.5) < 1e-12
    assert (bins[1]["n"], bins[1]["exact_match"], bins[1]["exact_match_stderr"]) == (1, 1.0, 0.0)


def test_series_exact_match_breaks_down_by_largest_integer():
    """Digits of the largest numerator or denominator; exponents ("x**12", "O(x**6)") do not count."""
    from hf_vanilla_transformer.tasks.series.reports import exact_match_by_largest_integer

    references = [
        "x**12 + O(x**6)",
        "1 + 2*x/15 + O(x**6)",
        "-x/2 + O(x**6)",
        "945*a*x**3/4 + O(x**6)",
        "123456*x",
    ]
    predictions = ["x**12 + O(x**6)", "1 + 2*x/15 + O(x**6)", "wrong", "945*a*x**3/4 + O(x**6)", "wrong"]
    rows = exact_match_by_largest_integer(predictions, references, digit_groups=(1, 2, 3, 4))
    assert [(r["largest_integer_digits"], r["n"], r["exact_match"]) for r in rows] == [
        ("1", 2, 0.5),  # the first has no coefficient integer at all
        ("2", 1, 1.0),
        ("3", 1, 1.0),
        ("4+", 1, 0.0),
    ]


def test_series_exact_match_breaks_down_by_number_of_terms():
    """Terms are function calls of the source, a power of one counting once; groups come fewest first."""
    from hf_vanilla_transformer.tasks.series.reports import exact_match_by_term_count

    sources = ["sin(a*x)*cos(b*x) + exp(c*x)", "exp(c*x)**3", "tan(a*x)/tanh(2*b*x)", "sinh(-d*x)*cosh(f*x)"]
    predictions = ["p", "q", "wrong", "r"]
    references = ["p", "q", "s", "r"]
    rows = exact_match_by_term_count(sources, predictions, references)
    assert [(r["terms"], r["n"], r["exact_match"]) for r in rows] == [
        ("1", 1, 1.0),
        ("2", 2, 0.5),
        ("3", 1, 1.0),
    ]
    assert abs(rows[1]["exact_match_stderr"] - (0.25 / 2) ** 0.5) < 1e-12


def test_series_exact_match_breaks_down_by_overlap_with_training_expressions():
    """A test expression that is a training expression with its symbols renamed is counted apart."""
    from hf_vanilla_transformer.tasks.series.reports import exact_match_by_train_overlap

    train = ["sin(a*x)*cos(b*x)", "tan(c*x)"]
    sources = ["sin(g*x)*cos(d*x)", "sin(a*x)*cos(a*x)", "tanh(c*x)", "tan(f*x)"]
    predictions = ["p", "wrong", "q", "wrong"]
    references = ["p", "r", "q", "s"]
    rows = exact_match_by_train_overlap(sources, predictions, references, train)
    assert [(r["expression"], r["n"], r["exact_match"]) for r in rows] == [
        ("renaming of a training expression", 2, 0.5),
        ("new", 2, 0.5),
    ]
    only_new = exact_match_by_train_overlap(["exp(a*x)"], ["p"], ["p"], train)
    assert [(r["expression"], r["n"], r["exact_match_stderr"]) for r in only_new] == [("new", 1, 0.0)]


def test_series_exact_match_breaks_down_by_the_tutorials_length_limit():
    """The tutorial kept pairs of at most 200 of its tokens, start and end included: `x` is 3 tokens."""
    from hf_vanilla_transformer.tasks.series.grammar import tutorial_length
    from hf_vanilla_transformer.tasks.series.reports import exact_match_by_tutorial_length

    assert tutorial_length("x") == 3 and tutorial_length("sinh(2*g*x) + O(x**6)") == 12
    long_series = " + ".join(["a*x"] * 50)  # 50 * 3 tokens + 49 signs + 2 = 201
    assert tutorial_length(long_series) == 201
    sources = ["sin(a*x)", "sin(a*x)", "tan(b*x)"]
    references = ["a*x + O(x**6)", long_series, "b*x + O(x**6)"]
    predictions = ["a*x + O(x**6)", long_series, "wrong"]
    rows = exact_match_by_tutorial_length(sources, predictions, references)
    assert [(r["tutorial_length"], r["n"], r["exact_match"]) for r in rows] == [
        ("within 200 tutorial tokens", 2, 0.5),
        ("longer than 200 tutorial tokens", 1, 1.0),
    ]


@pytest.mark.parametrize(
    ("device", "message"),
    [
        ("cuda", "--device cuda: this machine has no CUDA GPU; pass --device cpu."),
        ("gpu7", "--device 'gpu7' is not a device: give cpu, cuda or cuda:N."),
    ],
)
def test_evaluation_refuses_a_device_it_cannot_use(monkeypatch, device, message):
    """Evaluation generates on the GPU where there is one (a WMT14 test set on the CPU takes hours); a device
    the machine lacks is refused as the option is read, naming it."""
    from hf_vanilla_transformer.errors import UsageError
    from hf_vanilla_transformer.evaluation.scoring import EvaluationArguments

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(UsageError) as refused:
        EvaluationArguments(model="outputs/run/final", device=device)
    assert str(refused.value) == message
    assert EvaluationArguments(model="outputs/run/final", device="cpu").device == "cpu"


def test_evaluation_decodes_in_the_dtype_asked_and_names_its_report_by_it(monkeypatch):
    """A report decoded in bfloat16 lies beside the one in the saved weights' dtype, not over it; a dtype that
    is none, or bfloat16 on a GPU without it, is refused as the option is read."""
    from hf_vanilla_transformer.errors import UsageError
    from hf_vanilla_transformer.evaluation.scoring import EvaluationArguments, report_path

    generation = {"num_beams": 4, "length_penalty": 0.6}
    names = {
        dtype: report_path(
            EvaluationArguments(model="unused", dtype=dtype, device="cpu"), generation, None
        ).name
        for dtype in ("auto", "bfloat16")
    }
    assert names["bfloat16"] == names["auto"].replace(".json", "-bfloat16.json") != names["auto"]
    with pytest.raises(UsageError, match="--dtype 'float64' is none: give auto, float32, bfloat16, float16"):
        EvaluationArguments(model="unused", dtype="float64", device="cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (7, 0))  # a V100
    monkeypatch.setattr(torch.version, "hip", None)
    with pytest.raises(UsageError, match="this GPU does not compute in bfloat16; give float16 or float32"):
        EvaluationArguments(model="unused", dtype="bfloat16", device="cuda")


def test_a_reports_name_says_its_decoding_as_the_model_cards_quote_it():
    """Greedy and beam search are named as before (the model cards quote `eval-test-beam6-lp1.4.json`);
    sampling has a name of its own, with its seed; any other option given is named by its keyword."""
    from hf_vanilla_transformer.evaluation.scoring import EvaluationArguments, report_path

    def name(generation: dict, **options) -> str:
        return report_path(
            EvaluationArguments(model="unused", device="cpu", **options), generation, None
        ).name

    assert name({"num_beams": 1, "max_new_tokens": None, "do_sample": False}) == "eval-test-greedy.json"
    beam = {"num_beams": 6, "max_new_tokens": 12, "do_sample": False, "length_penalty": 1.4}
    assert name(beam) == "eval-test-beam6-lp1.4.json"
    assert name({**beam, "no_repeat_ngram_size": 3}) == "eval-test-beam6-lp1.4-no_repeat_ngram_size3.json"
    sampling = {"num_beams": 1, "max_new_tokens": None, "do_sample": True, "top_k": 5}
    assert name(sampling, do_sample=True, top_k=5, seed=3) == "eval-test-sample-top_k5-seed3.json"


def test_evaluation_samples_as_translate_does_reproducibly_by_its_seed(translation_data, tmp_path):
    """`--do_sample true` (the decoding options translate.py takes): the same seed gives the same predictions,
    another seed others; the report records the seed and is named by it."""
    from transformers import AutoTokenizer

    from hf_vanilla_transformer import VanillaTransformerForConditionalGeneration
    from hf_vanilla_transformer.evaluation.scoring import EvaluationArguments, evaluate_model
    from hf_vanilla_transformer.saving import save_model_folder
    from hf_vanilla_transformer.tasks import DataArguments

    from .conftest import tiny_config

    tokenizer = AutoTokenizer.from_pretrained(translation_data / "tokenizer")
    torch.manual_seed(0)
    config = tiny_config(vocab_size=len(tokenizer), max_position_embeddings=64, task="translation")
    folder = save_model_folder(
        VanillaTransformerForConditionalGeneration(config), tokenizer, tmp_path / "model"
    )

    def evaluate(seed: int, output_file: str | None = None) -> dict:
        arguments = EvaluationArguments(
            model=str(folder), max_examples=6, batch_size=2, num_beams=1, max_new_tokens=8, do_sample=True,
            top_k=20, seed=seed, device="cpu", show_examples=0, output_file=output_file,
        )  # fmt: skip
        return evaluate_model(
            arguments, DataArguments(task="translation", dataset=str(translation_data / "data"))
        )

    first, again, other = evaluate(3), evaluate(3, str(tmp_path / "again.json")), evaluate(4)
    assert first["output_file"] == str(folder / "eval-test-first6-sample-top_k20-seed3.json")
    assert first["seed"] == 3 and first["generation"]["do_sample"] is True
    outputs = [[example["prediction"] for example in report["examples"]] for report in (first, again, other)]
    assert outputs[0] == outputs[1] != outputs[2]


def test_evaluation_cuts_a_source_at_the_length_the_model_was_trained_with(caplog):
    """Scoring decodes as translate.py does (`generate_texts`): a source longer than the length the model's
    config records it was trained with is fed to the model as its first tokens and its </s>, and its output
    is bounded by that length + 50; one warning says so. A model that records none is fed it whole."""
    import logging
    import random

    from hf_vanilla_transformer import VanillaTransformerForConditionalGeneration
    from hf_vanilla_transformer.decoding.generation import EXTRA_OUTPUT_TOKENS, generate_texts

    from .conftest import WORDS, make_word_tokenizer, tiny_config

    # A tokenizer of its own: a call that truncates leaves its truncation set on the Rust tokenizer, which the
    # session's shared one would then carry into the folders other tests save.
    word_tokenizer = make_word_tokenizer()
    model = VanillaTransformerForConditionalGeneration(tiny_config(vocab_size=len(word_tokenizer))).eval()
    fed = []
    generate = model.generate

    def recording_generate(**kwargs):
        fed.append((kwargs["input_ids"].tolist(), kwargs["max_length"]))
        return generate(**kwargs)

    model.generate = recording_generate
    long = " ".join(random.Random(4).choices(WORDS, k=20))
    ids = word_tokenizer(long)["input_ids"]
    generate_texts(model, word_tokenizer, [long], 1, {"num_beams": 1, "do_sample": False})
    assert fed.pop() == ([ids], 1 + len(ids) + EXTRA_OUTPUT_TOKENS + 1)  # the start token, the forced </s>
    model.config.max_source_length = 6
    with caplog.at_level(logging.WARNING):
        generate_texts(model, word_tokenizer, [long], 1, {"num_beams": 1, "do_sample": False})
    assert fed.pop() == ([ids[:5] + [word_tokenizer.eos_token_id]], 1 + 6 + EXTRA_OUTPUT_TOKENS + 1)
    assert "1 input(s) longer than 6 tokens, the longest source the model was trained with" in caplog.text
