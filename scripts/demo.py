r"""A demo page for saved models of this package: text in, generated text out, with the decoding settings a
user touches, the cross-attention of a chosen decoder layer and head as a heat map, and, for series models,
the CAS's expansion beside the model's with a verdict. Needs `pip install -e ".[demo]"` (Gradio).

    python scripts/demo.py                                   # the trained models shipped in model_cards/
    python scripts/demo.py --model outputs/multi30k-de-en/averaged --model series=outputs/series-50k/averaged
    python scripts/demo.py --model outputs/opus-mt-de-en --port 7860      # a converted Marian model

Each `--model` is a saved folder or a Hub id, with `series=` in front for a series-expansion model (its page
adds the CAS and the verdict); it gets a tab of its own. As a Hugging Face Space: set `app_file:
scripts/demo.py` in the Space's README and the models in the `DEMO_MODELS` variable (comma-separated, same
syntax); the page then listens where the Space expects it. Without either, it serves the trained models
shipped in this repository's model_cards/ folders. See docs/demo.md.
"""

from __future__ import annotations

import atexit
import json
import os
import socket
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from hf_vanilla_transformer.cli import parse_arguments, run_script
from hf_vanilla_transformer.decoding.generation import (
    default_max_new_tokens,
    generation_settings,
    length_limit,
)
from hf_vanilla_transformer.decoding.settings import DecodingArguments
from hf_vanilla_transformer.errors import UsageError
from hf_vanilla_transformer.extras import require
from hf_vanilla_transformer.metrics import exact_match
from hf_vanilla_transformer.options import Options
from hf_vanilla_transformer.sentences import (
    document_sentences,
    join_document,
    normalize_text,
    sentence_rules,
    split_document,
)
from hf_vanilla_transformer.tasks import Task, get_task
from hf_vanilla_transformer.tasks.registry import task_or_plain
from plot_attention import cross_attention, plot_cross_attention

# torch, the model and the CAS are imported where they are used: `--help` answers without them.
if TYPE_CHECKING:
    import torch
    from PIL import Image

    from hf_vanilla_transformer.tasks.series.equivalence import EquivalenceChecker

DECODINGS = ("greedy", "beam search", "sampling")
MEAN_OVER_HEADS = "mean over heads"
# Seconds the CAS may spend on one expansion, and sympy on comparing the model's series with it.
CAS_TIMEOUT = 10.0
COMPARISON_TIMEOUT = 5.0
DROP_MESSAGES = {
    "pole": "the expression has a pole at x = 0, so there is no Taylor series there",
    "constant": "its series does not depend on x",
    "timeout": f"the CAS took more than {CAS_TIMEOUT:g} s",
}


class DemoInputError(UsageError):
    """Input the page refuses, with a message for the user (shown in the page, no stack trace)."""


@dataclass
class ModelSpec:
    """One `--model` argument: `[series=]<folder or Hub id>`."""

    location: str
    task: str | None = None  # None: the model's own (its config's `task`)

    @classmethod
    def parse(cls, text: str) -> ModelSpec:
        task, separator, location = text.partition("=")
        if not separator:
            return cls(text)
        return cls(location, get_task(task).name)


@dataclass
class DemoModel:
    """A loaded model and what its tab needs: generation, attention maps, and for series the CAS."""

    spec: ModelSpec
    model: torch.nn.Module = field(repr=False)
    tokenizer: object = field(repr=False)

    @classmethod
    def load(cls, spec: ModelSpec) -> DemoModel:
        from hf_vanilla_transformer.saving import check_model_task, load_model_folder, model_task

        model, tokenizer = load_model_folder(spec.location)  # a missing folder is named, not sent to the Hub
        if spec.task is None:
            spec = ModelSpec(spec.location, task_or_plain(model_task(model, spec.location)).name)
        else:
            try:
                check_model_task(model, spec.location, spec.task, fix=f"--model {{task}}={spec.location}")
            except ValueError as error:
                raise UsageError(str(error)) from None
        return cls(spec, model, tokenizer)

    @property
    def task(self) -> Task:
        return task_or_plain(self.spec.task)

    @property
    def name(self) -> str:
        return f"{self.spec.task}: {Path(self.spec.location).name or self.spec.location}"

    @property
    def max_input_tokens(self) -> int:
        limits = [self.tokenizer.model_max_length]
        if self.model.config.position_embedding_type == "learned":
            limits.append(self.model.config.max_position_embeddings)
        return min(limits)

    @property
    def num_layers(self) -> int:
        return self.model.config.decoder_layers

    @property
    def num_heads(self) -> int:
        return self.model.config.decoder_attention_heads

    @property
    def saved_decoding(self) -> dict:
        """The decoding the page starts with: the folder's saved generation config (beam 4 and length penalty
        0.6 for a model this package trains; beam 6 and 1.4 for the shipped Multi30k model), as `generate()`
        would decode without arguments."""
        config = self.model.generation_config
        num_beams = config.num_beams or 1
        decoding = "sampling" if config.do_sample else "beam search" if num_beams > 1 else "greedy"
        length_penalty = 1.0 if config.length_penalty is None else config.length_penalty
        return {"decoding": decoding, "num_beams": min(num_beams, 8), "length_penalty": length_penalty}

    @property
    def default_max_new_tokens(self) -> int:
        # What evaluation allows, for a source of 50 tokens (a long caption), within the slider's range.
        return min(512, default_max_new_tokens(self.task, self.model.generation_config, source_tokens=50))

    def check_input(self, text: str) -> str:
        text = normalize_text(text or "").strip()  # as the pipeline reads it: a pasted U+2028 is a line break
        if not text:
            raise DemoInputError(f"The input is empty: type {self.task.input_hint} first.")
        try:
            self.task.check_input(text)
        except UsageError as error:
            raise DemoInputError(f"Not an input the model was trained on: {error}") from None
        sentences = document_sentences(self.sentences(text))
        length = max(len(self.tokenizer(sentence)["input_ids"]) for sentence in sentences)
        if length > self.max_input_tokens:
            which = "The input is" if len(sentences) == 1 else "A sentence of the input is"
            raise DemoInputError(
                f"{which} {length} tokens long; this model takes at most {self.max_input_tokens}. Shorten it."
            )
        return text

    def sentences(self, text: str) -> list[str | list[str]]:
        """`text` as the model reads it: a text as the pipeline splits it (lists of sentences between its line
        breaks, `split_document`, by the rules of the model's source language), an input that is no text
        (series) whole."""
        if not self.task.splits_into_sentences:
            return [[text]]
        return split_document(text, sentence_rules(None, self.model.config.langs))

    def generation_kwargs(
        self, decoding: str, num_beams: int, length_penalty: float, max_new_tokens: int, temperature: float,
        top_p: float,
    ) -> dict:  # fmt: skip
        """generate()'s keywords for the page's controls: the decoding options they set
        (`DecodingArguments`, as translate.py and evaluate_model.py take them) over the saved generation
        config, a value outside an option's range refused in the page."""
        if decoding not in DECODINGS:
            raise DemoInputError(f"Unknown decoding {decoding!r}; choose one of {', '.join(DECODINGS)}.")
        chosen = {"num_beams": 1, "max_new_tokens": int(max_new_tokens)}
        if decoding == "beam search":
            chosen.update(num_beams=int(num_beams), length_penalty=float(length_penalty))
        elif decoding == "sampling":
            chosen.update(do_sample=True, temperature=float(temperature), top_p=float(top_p), top_k=0)
        try:
            options = DecodingArguments(**chosen)
        except UsageError as error:
            raise DemoInputError(str(error)) from None
        kwargs = generation_settings(options, self.task, self.model.generation_config)
        kwargs.update(length_limit(kwargs.pop("max_new_tokens")))
        return kwargs

    def generate(self, text: str, **generation) -> str:
        return self.generate_sentences(text, **generation)[0]

    def generate_sentences(self, text: str, **generation) -> tuple[str, list[tuple[str, str]]]:
        """The output for `text`, generated sentence by sentence as the pipeline does (one batch) and joined
        with the text's line breaks, and the (sentence, output) pairs."""
        import torch

        parts = self.sentences(text)
        sentences = document_sentences(parts)
        inputs = self.tokenizer(sentences, return_tensors="pt", padding=True).to(self.model.device)
        with torch.inference_mode():
            ids = self.model.generate(**inputs, **generation)
        outputs = [output.strip() for output in self.tokenizer.batch_decode(ids, skip_special_tokens=True)]
        return join_document(parts, iter(outputs)), list(zip(sentences, outputs, strict=True))

    def attention_map(self, text: str, output: str, layer: int, head: str, title: str = "") -> Image.Image:
        """The cross-attention of decoder `layer` (1-based) while the model reads its own `output`, for one
        head ("head 3") or averaged over heads, drawn by `plot_cross_attention`."""
        if not 1 <= int(layer) <= self.num_layers:
            raise DemoInputError(
                f"Layer {layer} does not exist: the decoder has layers 1 to {self.num_layers}."
            )
        weights, source_tokens, target_tokens = cross_attention(
            self.model, self.tokenizer, text, output, layer=int(layer) - 1
        )
        if head == MEAN_OVER_HEADS:
            weights, titles = weights.mean(0, keepdim=True), [MEAN_OVER_HEADS]
        else:
            index = int(head.removeprefix("head "))
            weights, titles = weights[index : index + 1], [head]
        with tempfile.TemporaryDirectory() as folder:
            path = plot_cross_attention(
                weights, source_tokens, target_tokens, Path(folder) / "attention.png",
                title=f"decoder layer {layer}{title}", head_titles=titles,
            )  # fmt: skip
            from PIL import Image  # Pillow comes with the demo's extra (Gradio, matplotlib)

            image = Image.open(path)
            image.load()
        return image


def cas_expansion(expression: str) -> tuple[str | None, str]:
    """The CAS's series of `expression` (time-limited, in a worker), or None and why there is none."""
    from hf_vanilla_transformer.tasks.series.workers import generate_examples

    result = generate_examples(
        1, candidates=[expression], num_proc=1, timeout=CAS_TIMEOUT, max_target_chars=None, progress=False
    )
    if result.examples:
        return result.examples[0][1], ""
    reason = next((reason for reason, count in result.drops.items() if count), "error")
    return None, f"No series from the CAS: {DROP_MESSAGES.get(reason, reason)}."


def series_verdict(prediction: str, reference: str, checker: EquivalenceChecker) -> str:
    """exact / symbolically equal / wrong, by the package's own metric (parser and sympy comparison)."""
    if exact_match(prediction, reference):
        return "exact: the CAS's series, character for character"
    try:
        result = checker.check(prediction, reference)
    except ValueError as error:  # the reference does not parse
        return f"not compared: {error}"
    if not result.parsed:
        return "wrong: the output is not a series of the grammar"
    if result.equivalent:
        return "symbolically equal: the same series, written differently"
    if result.timed_out:
        return f"wrong (counted as the metric counts it): sympy could not compare in {COMPARISON_TIMEOUT:g} s"
    return "wrong: a different series"


def build_demo(models: list[DemoModel]):
    """The Gradio page: one tab per model. Each tab's Generate button is also an API endpoint,
    `/generate_<i>` (i = 0, 1, ... in `--model` order), for `gradio_client`."""
    gr = require("gradio", "The demo page")
    from hf_vanilla_transformer.tasks.series.equivalence import EquivalenceChecker

    checker = EquivalenceChecker(timeout=COMPARISON_TIMEOUT)
    # Tabs' events may run at the same time; the checker's one worker takes one pair at a time.
    checker_lock = threading.Lock()

    def make_handler(demo_model: DemoModel):
        def run(text, decoding, num_beams, length_penalty, max_new_tokens, temperature, top_p, layer, head):
            try:
                text = demo_model.check_input(text)
                generation = demo_model.generation_kwargs(
                    decoding, num_beams, length_penalty, max_new_tokens, temperature, top_p
                )
                output, pairs = demo_model.generate_sentences(text, **generation)
                of = f", sentence 1 of {len(pairs)}" if len(pairs) > 1 else ""
                image = demo_model.attention_map(*pairs[0], layer, head, title=of)
            except DemoInputError as error:
                raise gr.Error(str(error), print_exception=False) from None
            if not demo_model.task.expands_with_cas:
                return output, image, "", ""
            reference, why_not = cas_expansion(text)
            if reference is None:
                return output, image, why_not, "no verdict: the CAS has no series to compare with"
            with checker_lock:
                return output, image, reference, series_verdict(output, reference, checker)

        return run

    with gr.Blocks(title="hf-vanilla-transformer") as demo:
        gr.Markdown(
            "# The Transformer of *Attention Is All You Need*\n"
            "Type an input, pick how to decode, and see where each decoder layer looked: row *i* of the heat "
            "map is the attention over the source while the model wrote output token *i*."
        )
        for index, demo_model in enumerate(models):
            task = demo_model.task
            with gr.Tab(demo_model.name):
                with gr.Row():
                    with gr.Column():
                        text = gr.Textbox(
                            value=task.demo_examples[0],
                            label=task.input_label,
                            lines=2,
                        )
                        saved = demo_model.saved_decoding
                        decoding = gr.Radio(list(DECODINGS), value=saved["decoding"], label="decoding")
                        with gr.Row():
                            num_beams = gr.Slider(
                                1, 8, value=saved["num_beams"], step=1, label="beams (beam search)"
                            )
                            length_penalty = gr.Slider(
                                0.0, 2.0, value=saved["length_penalty"], step=0.1, label="length penalty"
                            )
                        with gr.Row():
                            temperature = gr.Slider(
                                0.1, 2.0, value=1.0, step=0.1, label="temperature (sampling)"
                            )
                            top_p = gr.Slider(0.1, 1.0, value=0.9, step=0.05, label="top-p (sampling)")
                        max_new_tokens = gr.Slider(
                            1, 512, value=demo_model.default_max_new_tokens, step=1, label="max new tokens"
                        )
                        with gr.Row():
                            layer = gr.Dropdown(
                                list(range(1, demo_model.num_layers + 1)), value=demo_model.num_layers,
                                label="decoder layer",
                            )  # fmt: skip
                            head = gr.Dropdown(
                                [MEAN_OVER_HEADS, *(f"head {h}" for h in range(demo_model.num_heads))],
                                value=MEAN_OVER_HEADS, label="attention head",
                            )  # fmt: skip
                        button = gr.Button("Generate", variant="primary")
                    with gr.Column():
                        output = gr.Textbox(label="model output", lines=3)
                        cas = gr.Textbox(
                            label="CAS expansion (sympy/symengine)", lines=3, visible=task.expands_with_cas
                        )
                        verdict = gr.Textbox(label="verdict", visible=task.expands_with_cas)
                        heat_map = gr.Image(
                            label="cross-attention",
                            format="png",
                            type="pil",
                            height=560,
                            elem_id=f"heat-map-{index}",
                        )
                inputs = [
                    text,
                    decoding,
                    num_beams,
                    length_penalty,
                    max_new_tokens,
                    temperature,
                    top_p,
                    layer,
                    head,
                ]
                outputs = [output, heat_map, cas, verdict]
                handler = make_handler(demo_model)
                button.click(handler, inputs, outputs, api_name=f"generate_{index}")
                # The page opens with its first example already run: a heat map, not an empty box.
                demo.load(handler, inputs, outputs, api_visibility="private")
                gr.Examples([[example] for example in task.demo_examples], inputs=[text])
    atexit.register(checker.close)  # its sympy worker is a process of its own
    return demo


def shipped_model_specs(root: Path) -> list[ModelSpec]:
    """One spec per shipped model folder, its task read from the evaluation report the folder carries."""
    specs = []
    for weights in sorted(root.glob("*/model.safetensors")):
        reports = sorted(weights.parent.glob("eval-*.json"))
        task = json.loads(reports[0].read_text(encoding="utf-8"))["data"]["task"] if reports else None
        specs.append(ModelSpec(str(weights.parent), task_or_plain(task).name))
    return specs


def resolve_model_specs(models: list[str] | None, shipped: Path) -> list[ModelSpec]:
    """The models to serve: `models` (`--model` values), else the `DEMO_MODELS` variable (a Space sets its
    models there, comma-separated), else the trained models shipped in the folder `shipped`."""
    if models is None and os.environ.get("DEMO_MODELS"):
        models = [item.strip() for item in os.environ["DEMO_MODELS"].split(",") if item.strip()]
    specs = [ModelSpec.parse(item) for item in models] if models else shipped_model_specs(shipped)
    if not specs:
        raise UsageError(
            f"No model shipped in {shipped} here: pass at least one --model (or set DEMO_MODELS), e.g. "
            "--model series=outputs/series-50k/averaged."
        )
    return specs


def check_port_free(host: str | None, port: int) -> None:
    """Refuse a port something already listens on, naming our option (Gradio's own error names its
    environment variable), before minutes of model loading."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host or "127.0.0.1", port))
        except OSError as error:
            raise UsageError(
                f"Port {port} is in use ({error.strerror}): pass a free one with --port."
            ) from None


def serve(specs: list[ModelSpec], host: str | None = None, port: int | None = None) -> None:
    """Load the models and serve the page until interrupted."""
    if port is not None:
        check_port_free(host, port)
    build_demo([DemoModel.load(spec) for spec in specs]).launch(server_name=host, server_port=port)


# The trained models shipped with the repository: each card folder that holds weights.
SHIPPED_MODELS = Path(__file__).resolve().parents[1] / "model_cards"


@dataclass
class DemoArguments(Options):
    model: list[str] | None = field(
        default=None,
        metadata={
            "help": "[series=]<saved folder or Hub id>; repeat for several models (one tab each). Default: "
            "the trained models shipped in model_cards/.",
            "action": "extend",
        },
    )
    host: str | None = field(
        default=None, metadata={"help": "Interface to listen on (default 127.0.0.1; 0.0.0.0 for all)."}
    )
    port: int | None = field(
        default=None,
        metadata={"help": "Port (default: Gradio's, 7860 or the next free).", "range": "[1, 65535]"},
    )


def main() -> None:
    (args,) = parse_arguments(DemoArguments, description=__doc__)
    serve(resolve_model_specs(args.model, SHIPPED_MODELS), args.host, args.port)


if __name__ == "__main__":
    run_script(main)
