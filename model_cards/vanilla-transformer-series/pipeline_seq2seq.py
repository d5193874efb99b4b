"""A text-to-text pipeline for encoder-decoder models: `pipeline("seq2seq-generation", model=folder)`.

transformers v5 removed the `translation`, `text2text-generation` and `summarization` pipelines
(`pipeline("translation")` now raises). This restores the one call from text to text, backed by
`AutoModelForSeq2SeqLM` and the model's own `generate()` (and its saved generation config).

A paragraph or a whole document is translated sentence by sentence, as the models were trained: it is split
into sentences by the rules of the model's source language (`sentences.py`), they are translated in batches of
similar lengths, and the text comes back with its line and paragraph breaks (`split_sentences=False` hands the
text to the model whole).

This file imports only `torch`, `transformers` and `sentences.py` (the standard library): a saved model folder
carries both (`custom_pipelines` in config.json) so Hub users get the pipeline with `trust_remote_code=True`.
"""

from collections.abc import Callable

from transformers import AutoModelForSeq2SeqLM, Pipeline
from transformers.pipelines import PIPELINE_REGISTRY

from .sentences import normalize_text, sentence_rules, split_document, translate_documents

TASK_NAME = "seq2seq-generation"

# How the model's task (its config's `task`) takes an input: a check of one text that raises ValueError naming
# what is wrong (or None), and whether a text is split into sentences. The installed package sets it on import
# to ask its task registry; the copy a folder carries has none, and takes any model as plain text to text.
INPUT_RULES: Callable[[str | None], tuple[Callable[[str], None] | None, bool]] | None = None
# Sentences generated at once when a document is split and the call names no `batch_size`.
SENTENCE_BATCH_SIZE = 16


class Seq2SeqGenerationPipeline(Pipeline):
    """Text in, generated text out: `pipe("Ein Hund läuft.")` -> `[{"generated_text": "A dog runs."}]`.

    Accepts a string or a list of strings (batched with `batch_size=`); any `generate()` argument
    (`num_beams`, `max_new_tokens`, `do_sample`, `num_return_sequences`, ...) can be given at construction
    or per call. `truncation=True` truncates inputs to the tokenizer's `model_max_length` instead of
    letting the model reject inputs longer than it allows.

    Every text is first read as the package's readers read a file (`sentences.normalize_text`): a byte-order
    mark, CRLF or U+2028 changes no translation. An empty list gives an empty list; a text that is empty once
    read (white space, a byte-order mark alone) is refused, as is an item that is no string, naming its index.

    A text of several sentences is translated sentence by sentence and joined again, its line breaks kept
    (`split_sentences=True`, the default). The sentence rules are the model's source language's (its config's
    `langs`); `source_lang=` names another, and a model that records none is split by English rules. An input
    that is no text (the series task's expressions) is never split.
    """

    # What `pipeline(model=folder)` loads beside the model: a tokenizer and nothing else. transformers reads
    # these class flags to decide; it documents no public way to say it, and without them it would guess from
    # a model type it does not know. tests/test_loading.py pins it (a folder's pipeline in a process without
    # the package).
    _load_tokenizer = True
    _load_processor = False
    _load_image_processor = False
    _load_feature_extractor = False

    def _sanitize_parameters(
        self,
        truncation=None,
        skip_special_tokens=None,
        split_sentences=None,
        source_lang=None,
        **generate_kwargs,
    ):
        # `split_sentences` and `source_lang` are read by `__call__`; kept here so they can be given at
        # construction too.
        preprocess_params = {
            name: value
            for name, value in (
                ("truncation", truncation),
                ("split_sentences", split_sentences),
                ("source_lang", source_lang),
            )
            if value is not None
        }
        postprocess_params = (
            {} if skip_special_tokens is None else {"skip_special_tokens": skip_special_tokens}
        )
        return preprocess_params, generate_kwargs, postprocess_params

    def __call__(self, inputs, *args, **kwargs):
        if isinstance(inputs, list):
            if not inputs:
                return []  # no texts, no outputs: as a file of no lines is translated to none
            check_texts(inputs)
        settings = {**self._preprocess_params, **kwargs}
        split = settings.get("split_sentences", True)
        if not split or not self._input_rules()[1]:
            return super().__call__(inputs, *args, **kwargs)
        single = isinstance(inputs, str)
        texts = [inputs] if single else inputs
        if isinstance(texts, list) and all(isinstance(text, str) for text in texts):
            # Before splitting: a U+2028 or a lone CR is a line break to keep, a byte-order mark no word.
            texts = [normalize_text(text) for text in texts]
        if not isinstance(texts, list) or not all(isinstance(text, str) and text.strip() for text in texts):
            return super().__call__(inputs, *args, **kwargs)  # refused there, in one line
        language = sentence_rules(settings.get("source_lang"), getattr(self.model.config, "langs", None))
        documents = [split_document(text, language) for text in texts]
        if all(len(document) == 1 and len(document[0]) == 1 for document in documents):
            return super().__call__(inputs, *args, **kwargs)  # one sentence each: nothing to split
        if settings.get("num_return_sequences", self._forward_params.get("num_return_sequences", 1)) > 1:
            raise ValueError(
                "num_return_sequences > 1 gives several outputs for each sentence, which do not join into "
                "one text: pass split_sentences=False to generate from the text whole."
            )
        if kwargs.get("batch_size") is None and self._batch_size is None:
            kwargs["batch_size"] = SENTENCE_BATCH_SIZE

        generate = super().__call__

        def translate(sentences: list[str]) -> list[str]:
            return [output[0]["generated_text"] for output in generate(sentences, *args, **kwargs)]

        results = [[{"generated_text": text}] for text in translate_documents(documents, translate)]
        return results[0] if single else results

    def preprocess(self, text, truncation: bool = False, **split_settings):  # those are `__call__`'s
        if not isinstance(text, str):
            raise TypeError(f"{TASK_NAME} takes a string or a list of strings, got {type(text).__name__}.")
        # Every input passes here, split or not. White space around a text is no part of it: the models were
        # trained on lines without it, and a series expression read with its line end would decode otherwise.
        text = normalize_text(text).strip()
        if not text:
            # Given nothing, a model still writes something: a sentence made up from its start token alone.
            raise ValueError(f"{TASK_NAME} got an empty input: give it text to generate from.")
        check = self._input_rules()[0]
        if check is not None:
            check(text)
        return self.tokenizer(text, return_tensors="pt", truncation=truncation, return_token_type_ids=False)

    def _input_rules(self):
        task = getattr(self.model.config, "task", None)
        return INPUT_RULES(task) if INPUT_RULES is not None else (None, True)

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


def check_texts(texts: list) -> None:
    """Refuse a list holding an item that is no string, or a text empty once read, naming its index: the
    per-text refusal of `preprocess` cannot say which of a batch it was."""
    for index, text in enumerate(texts):
        where = f"item {index} of {len(texts)}"
        if not isinstance(text, str):
            raise TypeError(
                f"{TASK_NAME} takes a string or a list of strings, but {where} is {type(text).__name__}: "
                "pass each text as a string."
            )
        if not normalize_text(text).strip():
            raise ValueError(
                f"{TASK_NAME} got an empty input ({where} holds no text): give it text to generate from, or "
                "leave that item out."
            )


def register_pipeline() -> None:
    """Register `Seq2SeqGenerationPipeline` under `TASK_NAME` (idempotent)."""
    if TASK_NAME not in PIPELINE_REGISTRY.get_supported_tasks():
        PIPELINE_REGISTRY.register_pipeline(
            TASK_NAME, pipeline_class=Seq2SeqGenerationPipeline, pt_model=AutoModelForSeq2SeqLM, type="text"
        )
