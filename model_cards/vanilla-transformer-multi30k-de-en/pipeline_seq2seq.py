"""A text-to-text pipeline for encoder-decoder models: `pipeline("seq2seq-generation", model=folder)`.

transformers v5 removed the `translation`, `text2text-generation` and `summarization` pipelines
(`pipeline("translation")` now raises). This restores the one call from text to text, backed by
`AutoModelForSeq2SeqLM` and the model's own `generate()` (and its saved generation config).

This file imports only `torch` and `transformers`: a saved model folder carries it (`custom_pipelines`
in config.json) so Hub users get the pipeline with `trust_remote_code=True`.
"""

from collections.abc import Callable

from transformers import AutoModelForSeq2SeqLM, Pipeline
from transformers.pipelines import PIPELINE_REGISTRY

TASK_NAME = "seq2seq-generation"

# A check of one input text for each task a model was trained on (its config's `task`): it raises ValueError
# naming what is wrong. Empty in the copy a folder carries; the installed package, when imported, adds the
# series model's grammar, outside which that model still answers, confidently and wrongly.
INPUT_CHECKS: dict[str, Callable[[str], None]] = {}


class Seq2SeqGenerationPipeline(Pipeline):
    """Text in, generated text out: `pipe("Ein Hund läuft.")` -> `[{"generated_text": "A dog runs."}]`.

    Accepts a string or a list of strings (batched with `batch_size=`); any `generate()` argument
    (`num_beams`, `max_new_tokens`, `do_sample`, `num_return_sequences`, ...) can be given at construction
    or per call. `truncation=True` truncates inputs to the tokenizer's `model_max_length` instead of
    letting the model reject inputs longer than it allows.
    """

    # What `pipeline(model=folder)` loads beside the model: a tokenizer and nothing else. transformers reads
    # these class flags to decide; it documents no public way to say it, and without them it would guess from
    # a model type it does not know. tests/test_loading.py pins it (a folder's pipeline in a process without
    # the package).
    _load_tokenizer = True
    _load_processor = False
    _load_image_processor = False
    _load_feature_extractor = False

    def _sanitize_parameters(self, truncation=None, skip_special_tokens=None, **generate_kwargs):
        preprocess_params = {} if truncation is None else {"truncation": truncation}
        postprocess_params = (
            {} if skip_special_tokens is None else {"skip_special_tokens": skip_special_tokens}
        )
        return preprocess_params, generate_kwargs, postprocess_params

    def preprocess(self, text, truncation: bool = False):
        if not isinstance(text, str):
            raise TypeError(f"{TASK_NAME} takes a string or a list of strings, got {type(text).__name__}.")
        if not text.strip():
            # Given nothing, a model still writes something: a sentence made up from its start token alone.
            raise ValueError(f"{TASK_NAME} got an empty input: give it text to generate from.")
        check = INPUT_CHECKS.get(getattr(self.model.config, "task", None))
        if check is not None:
            check(text)
        return self.tokenizer(text, return_tensors="pt", truncation=truncation, return_token_type_ids=False)

    def _forward(self, model_inputs, **generate_kwargs):
        # The arguments given at construction and per call, merged by `_sanitize_parameters` as for any custom
        # pipeline; `generate()` adds the model's saved generation config.
        output_ids = self.model.generate(**model_inputs, **generate_kwargs)
        # (batch * num_return_sequences, T) -> (batch, num_return_sequences, T)
        in_batch = model_inputs["input_ids"].shape[0]
        return {"output_ids": output_ids.reshape(in_batch, -1, output_ids.shape[-1])}

    def postprocess(self, model_outputs, skip_special_tokens: bool = True):
        sequences = model_outputs["output_ids"][0]
        texts = self.tokenizer.batch_decode(sequences, skip_special_tokens=skip_special_tokens)
        return [{"generated_text": text} for text in texts]


def register_pipeline() -> None:
    """Register `Seq2SeqGenerationPipeline` under `TASK_NAME` (idempotent)."""
    if TASK_NAME not in PIPELINE_REGISTRY.get_supported_tasks():
        PIPELINE_REGISTRY.register_pipeline(
            TASK_NAME, pipeline_class=Seq2SeqGenerationPipeline, pt_model=AutoModelForSeq2SeqLM, type="text"
        )
