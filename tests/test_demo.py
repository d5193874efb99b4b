"""The demo page (scripts/demo.py) served on a local port and called through `gradio_client`, as a browser
would call it: tiny models saved by the test, nothing downloaded. The real browser check (headless Chromium)
is `slow`."""

import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from PIL import Image

import demo
from hf_vanilla_transformer import VanillaTransformerConfig, VanillaTransformerForConditionalGeneration
from hf_vanilla_transformer.errors import UsageError
from hf_vanilla_transformer.saving import save_model_folder
from hf_vanilla_transformer.tasks.series.equivalence import EquivalenceChecker
from hf_vanilla_transformer.tasks.series.expansion import taylor_series
from hf_vanilla_transformer.tasks.series.tokenizer import tutorial_series_tokenizer
from hf_vanilla_transformer.tokenization import train_bpe_tokenizer

from .script_runner import run_script_file

FIXTURE = Path(__file__).parent / "fixtures" / "multi30k"
ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "model_cards"


def _save_tiny(tokenizer, folder: Path, **overrides) -> Path:
    config = VanillaTransformerConfig.from_preset(
        "transformer-tiny",
        vocab_size=len(tokenizer),
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.bos_token_id,
        **overrides,
    )
    torch.manual_seed(0)
    model = VanillaTransformerForConditionalGeneration(config).eval()
    model.generation_config.max_length = 40
    return save_model_folder(model, tokenizer, folder)


@pytest.fixture(scope="module")
def model_folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("demo-models")
    translation = train_bpe_tokenizer(
        [FIXTURE / "train.de.gz", FIXTURE / "train.en.gz"], vocab_size=300, show_progress=False,
        model_max_length=64,
    )  # fmt: skip
    return {
        "translation": _save_tiny(translation, root / "translation"),
        "series": _save_tiny(tutorial_series_tokenizer(model_max_length=64), root / "series"),
    }


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def served(model_folders):
    """The page for both models on a local port, and a `gradio_client.Client` talking to it."""
    from gradio_client import Client

    models = [
        demo.DemoModel.load(demo.ModelSpec(str(model_folders["translation"]))),
        demo.DemoModel.load(demo.ModelSpec(str(model_folders["series"]), "series")),
    ]
    page = demo.build_demo(models)
    port = _free_port()
    page.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    try:
        yield models, Client(f"http://127.0.0.1:{port}/", verbose=False)
    finally:
        page.close()


# text, decoding, beams, length penalty, max new tokens, temperature, top-p, layer, head
GREEDY = ("greedy", 4, 0.6, 20, 1.0, 0.9, 2, demo.MEAN_OVER_HEADS)


def test_series_tab_gives_output_heat_map_cas_and_verdict(served):
    models, client = served
    output, image, cas, verdict = client.predict("sin(a*x)", *GREEDY, api_name="/generate_1")
    series_model = models[1]
    expected_output = series_model.generate("sin(a*x)", **series_model.generation_kwargs(*GREEDY[:6]))
    assert output == expected_output
    assert cas == taylor_series("sin(a*x)")
    with EquivalenceChecker(timeout=5.0) as checker:
        assert verdict == demo.series_verdict(output, cas, checker)
    assert verdict.startswith(("exact", "symbolically equal", "wrong"))
    # The heat map is the package's drawing of the same attention: a PNG of the same size.
    drawn = series_model.attention_map("sin(a*x)", output, 2, demo.MEAN_OVER_HEADS)
    with Image.open(image) as served_image:
        assert served_image.format == "PNG" and served_image.size == drawn.size
        assert served_image.size[0] > 200 and served_image.size[1] > 200


def test_translation_tab_decodes_with_each_setting(served):
    models, client = served
    for decoding in ("greedy", "beam search", "sampling"):
        settings = (decoding, 3, 1.0, 8, 0.7, 0.9, 1, "head 2")
        output, image, cas, verdict = client.predict("Zwei Hunde spielen.", *settings, api_name="/generate_0")
        assert isinstance(output, str) and len(models[0].tokenizer(output)["input_ids"]) <= 9
        assert Image.open(image).size[0] > 200 and cas == "" and verdict == ""
    beam = models[0].generate(
        "Zwei Hunde spielen.", **models[0].generation_kwargs("beam search", 3, 1.0, 8, 1, 1)
    )
    assert client.predict("Zwei Hunde spielen.", "beam search", 3, 1.0, 8, 0.7, 0.9, 1, "head 2",
                          api_name="/generate_0")[0] == beam  # fmt: skip


@pytest.mark.parametrize(
    "endpoint, text, message",
    [
        ("/generate_1", "   ", "The input is empty"),
        ("/generate_1", "log(x)", "Not an input the model was trained on: .*unknown name 'log'"),
        ("/generate_1", "sin(a*x", "unbalanced parentheses"),
        (
            "/generate_1",
            "sin(x)*exp(x)",
            r"'sin\(x\)' is outside the model's grammar: exp, sin, .* of k\*s\*x",
        ),
        ("/generate_0", "Hund " * 200, r"is \d+ tokens long; this model takes at most 64"),
    ],
    ids=["empty", "unknown-function", "unbalanced", "outside-the-grammar", "too-long"],
)
def test_bad_input_gets_a_message_not_a_stack_trace(served, endpoint, text, message):
    from gradio_client.exceptions import AppError

    _, client = served
    with pytest.raises(AppError, match=message) as error:
        client.predict(text, *GREEDY, api_name=endpoint)
    assert "Traceback" not in str(error.value)


def test_an_expression_without_a_series_is_said_so(served):
    _, client = served
    output, _, cas, verdict = client.predict("tan(a*x)/sin(b*x)**2", *GREEDY, api_name="/generate_1")
    assert "pole at x = 0" in cas and verdict.startswith("no verdict")


def test_verdicts_follow_the_metric():
    reference = "a*x + O(x**6)"
    with EquivalenceChecker(timeout=5.0) as checker:
        assert demo.series_verdict("a*x + O(x**6)", reference, checker).startswith("exact")
        assert demo.series_verdict("x*a + O(x**6)", reference, checker).startswith("symbolically equal")
        assert demo.series_verdict("2*a*x + O(x**6)", reference, checker) == "wrong: a different series"
        assert "not a series" in demo.series_verdict("a*x + (", reference, checker)


def test_model_arguments_and_missing_folders_are_named(tmp_path, monkeypatch):
    assert demo.ModelSpec.parse("series=out/s") == demo.ModelSpec("out/s", "series")
    assert demo.ModelSpec.parse("out/t") == demo.ModelSpec("out/t", None)  # the model's own task, at load
    # Installed: the package's tasks (and any task file an earlier test of this process imported).
    with pytest.raises(UsageError, match=r"Unknown task 'summary'; installed: (\w+, )*series, translation"):
        demo.resolve_model_specs(["summary=out/s"], SHIPPED)
    monkeypatch.delenv("DEMO_MODELS", raising=False)
    shipped = demo.resolve_model_specs(None, SHIPPED)  # no --model: the models shipped in model_cards/
    assert shipped == demo.shipped_model_specs(SHIPPED) and shipped
    assert all((Path(spec.location) / "model.safetensors").is_file() for spec in shipped)
    with pytest.raises(UsageError, match="No model shipped"):
        demo.resolve_model_specs(None, tmp_path)
    monkeypatch.setenv("DEMO_MODELS", "a/b, series=c/d")
    assert [spec.task for spec in demo.resolve_model_specs(None, tmp_path)] == [None, "series"]
    result = run_script_file("demo.py", "--model", tmp_path / "missing", cwd=tmp_path)
    assert result.returncode != 0 and "missing" in result.stderr and "Traceback" not in result.stderr


def test_each_model_serves_its_own_task_and_a_mismatch_is_named():
    series = SHIPPED / "vanilla-transformer-series"
    assert demo.DemoModel.load(demo.ModelSpec(str(series))).spec.task == "series"  # read from its config
    with pytest.raises(
        UsageError, match=f"is a series model, not a translation one: give --model series={series}"
    ):
        demo.DemoModel.load(demo.ModelSpec(str(series), "translation"))
    multi30k = SHIPPED / "vanilla-transformer-multi30k-de-en"
    with pytest.raises(UsageError, match="is a translation model, not a series one"):
        demo.DemoModel.load(demo.ModelSpec(str(multi30k), "series"))


def test_a_port_in_use_is_refused_in_one_line_naming_our_option(tmp_path):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = run_script_file("demo.py", "--port", str(port), cwd=tmp_path)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr[-2000:]
    assert lines[0].startswith(f"error: Port {port} is in use") and lines[0].endswith(
        "pass a free one with --port."
    )


def test_long_attention_maps_are_drawn_at_a_bounded_size(tmp_path):
    """A long input within the demo's limits must not make an image PIL refuses to open (a decompression
    bomb): maps shrink their cells and label every n-th token."""
    weights = torch.rand(8, 256, 800)
    path = demo.plot_cross_attention(
        weights,
        [f"s{i}" for i in range(800)],
        [f"t{i}" for i in range(256)],
        tmp_path / "a.png",
        title="long",
    )
    width, height = Image.open(path).size
    assert width * height <= 20_000_000


@pytest.mark.slow
def test_page_renders_the_heat_map_in_headless_chromium(model_folders, tmp_path):
    """scripts/benchmarks/demo_screenshot.py: scripts/demo.py as a user starts it, opened in Debian's
    Chromium; the page runs its first example on load, and the screenshot is taken only once the browser
    shows the heat map as a loaded image (it fails otherwise)."""
    png = tmp_path / "page.png"
    script = ROOT / "scripts" / "benchmarks" / "demo_screenshot.py"
    subprocess.run(
        [sys.executable, str(script), "--output_file", str(png),
         "--model", f"series={model_folders['series']}"],
        check=True, timeout=600,
    )  # fmt: skip
    with Image.open(png) as page:
        assert page.format == "PNG" and page.size == (1400, 1100)
        # The heat map's viridis colours (purple to teal: more blue than red, far from grey) are on the page,
        # whose own colours are white, greys and orange.
        colours = page.convert("RGB").getcolors(maxcolors=1 << 20)
        assert sum(n for n, (r, g, b) in colours if b > r + 10 and max(r, g, b) - min(r, g, b) > 40) > 20_000


def test_the_page_starts_with_the_folders_saved_decoding(model_folders):
    """Beam 4 and length penalty 0.6, as the folder's generation config (and a bare `generate()`) decodes."""
    model = demo.DemoModel.load(demo.ModelSpec(str(model_folders["translation"])))
    assert model.saved_decoding == {"decoding": "beam search", "num_beams": 4, "length_penalty": 0.6}
    model.model.generation_config.num_beams = 1
    assert model.saved_decoding["decoding"] == "greedy"


def test_attention_labels_every_token_that_fits():
    from plot_attention import label_stride

    assert label_stride(7, (0.28 * 7 + 1.5 - 1.5) / 0.28) == 1  # 7.000000000000001 cells hold 7 labels
    assert label_stride(100, 10.5 / 0.28) == 3  # 37 fit: every third of 100
    assert label_stride(3, 0.5) == 3


def test_translation_tab_translates_a_paragraph_sentence_by_sentence(served):
    """As the pipeline does: each sentence through the model, joined again with the text's line breaks; the
    heat map is the first sentence's."""
    models, client = served
    settings = ("greedy", 1, 1.0, 8, 1.0, 0.9, 1, demo.MEAN_OVER_HEADS)
    one_by_one = [
        models[0].generate(sentence, **models[0].generation_kwargs(*settings[:6]))
        for sentence in ("Zwei Hunde spielen.", "Ein Mann liest.", "Eine Frau singt.")
    ]
    text = "Zwei Hunde spielen. Ein Mann liest.\n\nEine Frau singt."
    output = client.predict(text, *settings, api_name="/generate_0")[0]
    assert output == f"{one_by_one[0]} {one_by_one[1]}\n\n{one_by_one[2]}"


def test_the_pages_decoding_controls_are_the_decoding_options(model_folders):
    """The controls build the decoding options translate.py and evaluate_model.py take
    (`DecodingArguments`): a value outside an option's range is refused in the page, in the option's words."""
    model = demo.DemoModel.load(demo.ModelSpec(str(model_folders["translation"])))
    sampling = model.generation_kwargs("sampling", 1, 1.0, 8, 0.7, 0.9)
    assert sampling == {"num_beams": 1, "do_sample": True, "top_k": 0, "top_p": 0.9, "temperature": 0.7,
                        "max_length": 9}  # fmt: skip
    with pytest.raises(demo.DemoInputError, match=r"--temperature must be more than 0, got 0.0"):
        model.generation_kwargs("sampling", 1, 1.0, 8, 0.0, 0.9)
