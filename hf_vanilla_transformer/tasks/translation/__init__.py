"""The translation task: a `translation` column of `{language: sentence}` dicts (Multi30k, WMT14; datasets
with one column per language, like `bentrevett/multi30k`, are converted on loading), scored with sacreBLEU
(cased, detokenised, 13a) and chrF, each with its sacrebleu signature (Post, 2018), and in reports also with
lowercased BLEU and the paper's tokenized BLEU. This module is the task, as the registry knows it, and its
scores; beside it: `data` (the Hub, data-set folders, line-aligned text files), `tokenized_bleu` (the paper's
BLEU) and `marian` (importing Marian/OPUS-MT checkpoints)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...options import Options
from ..base import Task
from ..registry import register_task
from .tokenized_bleu import tokenized_bleu


@dataclass
class TranslationOptions(Options):
    source_lang: str = field(default="de", metadata={"help": "Translation source language."})
    target_lang: str = field(default="en", metadata={"help": "Translation target language."})
    split_punctuation: bool = field(
        default=False,
        metadata={
            "help": "Translation tokenizers: split punctuation from words before BPE (decoding stays exact)."
        },
    )


@register_task
class TranslationTask(Task):
    name = "translation"
    options = TranslationOptions
    best_metric = "bleu"
    input_label = "source sentence"
    input_hint = "a sentence"
    demo_examples = (
        "Zwei Hunde spielen im Schnee.",
        "Ein Mann fährt mit dem Fahrrad eine Straße entlang.",
        "Eine Frau in einem roten Kleid singt auf einer Bühne.",
    )
    splits_into_sentences = True
    claims_unnamed_models = True  # folders saved before configs named a task, and imported Marian models

    @property
    def data_made_by(self) -> str:
        return "python scripts/prepare_translation.py --dataset <Hub name or folder> --output_dir <folder>"

    @property
    def tokenizer_columns(self):
        return ("translation",)

    def text_fields(self, options):
        return ("translation", options.source_lang), ("translation", options.target_lang)

    def languages(self, options):
        return [options.source_lang, options.target_lang]

    def load_raw(self, dataset, dataset_config, options, streaming=False):
        from .data import load_translation_dataset  # datasets: imported when data is read

        # The loader checks the languages, and packs flat language columns (`de`, `en`) into `translation`.
        return load_translation_dataset(
            dataset,
            dataset_config,
            languages=(options.source_lang, options.target_lang),
            **({"streaming": True} if streaming else {}),
        )

    def task_scores(self, predictions, references):
        from sacrebleu.metrics import BLEU, CHRF  # imported when scored: a command's `--help` lists tasks

        # Corpus BLEU (cased, 13a) and chrF of the detokenised text: sacrebleu tokenizes it itself, so the
        # figures compare across papers whatever the model's tokenizer, and the signatures say how. A
        # signature is read after scoring: it counts the references scored against.
        bleu, chrf = BLEU(tokenize="13a"), CHRF()
        bleu_score = bleu.corpus_score(predictions, [references])
        chrf_score = chrf.corpus_score(predictions, [references])
        return {
            "bleu": bleu_score.score,
            "chrf": chrf_score.score,
            "bleu_signature": str(bleu.get_signature()),
            "chrf_signature": str(chrf.get_signature()),
        }

    def report_details(self, sources, predictions, references, train_sources, options):
        from sacrebleu.metrics import BLEU

        lowercase = BLEU(lowercase=True, tokenize="13a")
        lowercase_score = lowercase.corpus_score(predictions, [references])
        # The paper's tokenized BLEU, the figure its 27.3 / 28.4 on newstest2014 compare with.
        tokenized = tokenized_bleu(predictions, references, options.target_lang)
        return {
            "bleu_lowercase": lowercase_score.score,
            "bleu_lowercase_signature": str(lowercase.get_signature()),
            "bleu_paper_tokenized": tokenized["score"],
            "bleu_paper_tokenized_signature": tokenized["signature"],
        }, {}

    def train_tokenizer(self, corpus, vocab_size, options, **settings):
        from ...tokenization import train_bpe_tokenizer

        return train_bpe_tokenizer(
            corpus, vocab_size, split_punctuation=options.split_punctuation, **settings
        )

    def tokenizer_check_texts(self, validation):
        groups: dict[str, list[str]] = {}
        for pair in validation["translation"]:
            for lang, text in pair.items():
                groups.setdefault(lang, []).append(text)
        return groups
