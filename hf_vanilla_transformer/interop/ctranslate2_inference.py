"""Generate with a CTranslate2 export (see `ctranslate2_export`): our tokenizer in, text out.

This module imports only `ctranslate2`, `tokenizers`, the standard library and the package's `sentences.py`
(which splits documents into sentences as the pipeline does), never torch: with torch loaded
in the same process CTranslate2's float32 decoding ran about 1.85x slower on this project's CPUs (two OpenMP
runtimes, see the benchmark). Imported as `hf_vanilla_transformer.interop.ctranslate2_inference` it loads no
more (the package's `__init__` loads nothing heavy: translate.py's `--backend ctranslate2` runs so); a service
may also load this file by path, without the package (it loads `sentences.py` the same way):

    import importlib.util, pathlib
    package = pathlib.Path(importlib.util.find_spec("hf_vanilla_transformer").origin).parent  # no import
    package_dir = package / "interop"
    spec = importlib.util.spec_from_file_location("ct2_inference", package_dir / "ctranslate2_inference.py")
    ct2_inference = importlib.util.module_from_spec(spec); spec.loader.exec_module(ct2_inference)
    model = ct2_inference.CTranslate2Seq2Seq("outputs/ct2/multi30k-de-en-int8")
    model.generate(["Ein Hund läuft."], beam_size=1)  # CTranslate2's own decoding options

(`tests/test_ctranslate2.py` runs exactly this in a fresh process and checks that torch stays out.)
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Sequence
from pathlib import Path

import ctranslate2
from tokenizers import Tokenizer

try:
    from ..sentences import normalize_text, sentence_rules, split_document, translate_documents
except ImportError:  # loaded by path without the package: its sentence splitting, loaded by path too
    _sentences_file = Path(__file__).resolve().parents[1] / "sentences.py"
    if not _sentences_file.is_file():
        raise ImportError(
            f"{Path(__file__).name} needs hf_vanilla_transformer's sentences.py at {_sentences_file}: load "
            "it from the installed package's folder, as its docstring shows, not from a copy."
        ) from None
    _spec = importlib.util.spec_from_file_location("hf_vanilla_transformer_sentences", _sentences_file)
    _sentences = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_sentences)
    sentence_rules, split_document = _sentences.sentence_rules, _sentences.split_document
    normalize_text, translate_documents = _sentences.normalize_text, _sentences.translate_documents

# Written by `ctranslate2_export` next to CTranslate2's files: the source model's decoding defaults.
GENERATION_DEFAULTS_FILE = "generation_defaults.json"
# Its key for what the model's task says of decoding (its name, `output_length_from_config`,
# `splits_into_sentences`), recorded so that the package's translate.py decodes an export without importing
# the tasks' code; absent from exports of earlier versions and of a task not installed where it was made.
TASK_TRAITS = "task_traits"
EXPORT_AGAIN = "Export the model again (scripts/export_ctranslate2.py)."


class UnreadableExportError(OSError):
    """A file of an export is truncated or corrupt (a copy or download cut short): the user exports again.
    This file cannot import the package's errors; the package's callers make it a `CorruptFileError`."""


def _unreadable_model(model_dir: Path) -> bool:
    """Whether an export's model.bin is what fails to load: it does not load on the CPU with the compute
    type it was saved with either (a refused device or compute type would load there)."""
    try:
        ctranslate2.Translator(str(model_dir), device="cpu", compute_type="default")
    except RuntimeError:
        return True
    return False


class CTranslate2Seq2Seq:
    """A CTranslate2 `Translator` over an exported folder, with the model's own tokenizer and decoding
    defaults (`defaults`, as the export saved them: beams, length penalty and `max_length` from the model's
    generation config; its `max_position_embeddings`, the longest input `generate_ids` takes; the source
    length it was trained with, `max_source_length`, None where the model recorded none, at which the
    package's translate.py cuts a longer source; its languages and task).

    Args:
        model_dir: folder written by `convert_to_ctranslate2`.
        device: "cpu", "cuda" or "auto".
        device_index: which GPU, for "cuda".
        compute_type: CTranslate2's compute type ("default" keeps the exported weight type; "int8", "float32",
            "int8_float16", ... convert at load time).
        intra_threads: threads per translation (0: CTranslate2's default).
    """

    def __init__(
        self,
        model_dir: str | Path,
        device: str = "cpu",
        compute_type: str = "default",
        intra_threads: int = 0,
        device_index: int = 0,
    ):
        model_dir = Path(model_dir)
        for required in ("model.bin", "tokenizer.json", GENERATION_DEFAULTS_FILE):
            if not (model_dir / required).is_file():
                raise FileNotFoundError(
                    f"{model_dir} has no {required}: it is not a folder written by "
                    "hf_vanilla_transformer.interop.ctranslate2_export.convert_to_ctranslate2 "
                    "(scripts/export_ctranslate2.py)."
                )
        # Each file read with its faults named: CTranslate2, tokenizers and json name none.
        try:
            self.translator = ctranslate2.Translator(
                str(model_dir),
                device=device,
                device_index=device_index,
                compute_type=compute_type,
                intra_threads=intra_threads,
            )
        except RuntimeError as error:
            if not _unreadable_model(model_dir):
                raise
            raise UnreadableExportError(
                f"{model_dir / 'model.bin'} is truncated or corrupt, or written by a newer CTranslate2 "
                f"(CTranslate2: {error}). {EXPORT_AGAIN}"
            ) from error
        try:
            self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        except Exception as error:  # tokenizers raises a bare Exception for a file that does not parse
            raise UnreadableExportError(
                f"{model_dir / 'tokenizer.json'} is truncated or corrupt: it does not load as a tokenizer "
                f"({error}). {EXPORT_AGAIN}"
            ) from error
        # CTranslate2 takes ragged batches; padding ids would be read as real source tokens.
        self.tokenizer.no_padding()
        try:
            self.defaults = json.loads((model_dir / GENERATION_DEFAULTS_FILE).read_bytes())
        except ValueError as error:
            raise UnreadableExportError(
                f"{model_dir / GENERATION_DEFAULTS_FILE} is truncated or corrupt: it does not parse as JSON "
                f"({error}). {EXPORT_AGAIN}"
            ) from error

    def generate_ids(self, source_ids: Sequence[Sequence[int]], **options) -> list[list[int]]:
        """Decode token-id inputs (with their `</s>`, as our tokenizer makes them); returns the generated ids
        without the decoder start token and without `</s>`.

        `options` are CTranslate2's own, the keywords of `ctranslate2.Translator.translate_batch`
        (`beam_size`, `length_penalty`, `max_decoding_length`, `sampling_topk`, ...). One left out, or None,
        is the export's saved decoding (`beam_size`, `length_penalty` and `max_decoding_length`, from the
        source model's generation config), else CTranslate2's default, except `min_decoding_length`: 0, as
        generate() has it (CTranslate2 forbids an empty output by default, and an immediate </s> must decode
        the same on both). The package's decoding options reach these keywords through
        `hf_vanilla_transformer.decoding.backends.ctranslate2_options`."""
        limit = self.defaults["max_position_embeddings"]
        too_long = [index for index, ids in enumerate(source_ids) if len(ids) > limit]
        if too_long:
            raise ValueError(
                f"Inputs {too_long[:5]} are longer than the model's {limit} positions; truncate them "
                f"(e.g. tokenizer truncation with max_length={limit})."
            )
        settings = {
            "beam_size": self.defaults["num_beams"],
            "length_penalty": self.defaults["length_penalty"],
            "max_decoding_length": self.defaults["max_length"],
            "min_decoding_length": 0,
        }
        settings.update({name: value for name, value in options.items() if value is not None})
        tokens = [[self.tokenizer.id_to_token(index) for index in ids] for ids in source_ids]
        results = self.translator.translate_batch(tokens, **settings)
        return [[self.tokenizer.token_to_id(token) for token in result.hypotheses[0]] for result in results]

    def generate(
        self,
        texts: Sequence[str],
        split_sentences: bool = True,
        source_lang: str | None = None,
        **kwargs,
    ) -> list[str]:
        """Translate `texts` with `generate_ids(**kwargs)` (CTranslate2's keywords: `beam_size=1`, ...). A
        text of several sentences is translated sentence by sentence and joined again with its line breaks, as
        the package's pipeline does: by the rules of `source_lang`, else of the model's source language
        (recorded at export), else English (`split_sentences=False` hands each text to the model whole). Each
        text is read as the pipeline reads it (`sentences.normalize_text`)."""
        texts = [normalize_text(text) for text in texts]
        if not split_sentences:
            return self._generate_texts(texts, **kwargs)
        language = sentence_rules(source_lang, self.defaults.get("langs"))
        documents = [split_document(text, language) for text in texts]
        return translate_documents(documents, lambda sentences: self._generate_texts(sentences, **kwargs))

    def _generate_texts(self, texts: list[str], **kwargs) -> list[str]:
        source_ids = [encoding.ids for encoding in self.tokenizer.encode_batch(texts)]
        outputs = self.generate_ids(source_ids, **kwargs)
        return self.tokenizer.decode_batch(outputs, skip_special_tokens=True)
