"""Documents into sentences for translation, by pysbd's rules (a rule-based sentence boundary detector made
for this, with each language's abbreviations; pure Python, nothing to download), registered with the
package's pipeline (`pipeline_seq2seq.SENTENCE_SPLITTERS`). Without the package, a saved folder's pipeline
cuts at sentence-final punctuation instead."""

from __future__ import annotations

from functools import cache

from .errors import UsageError
from .pipeline_seq2seq import SENTENCE_SPLITTERS


@cache
def _segmenter(language: str):
    import pysbd
    from pysbd.languages import LANGUAGE_CODES

    if language not in LANGUAGE_CODES:
        raise UsageError(
            f"No sentence rules for source_lang={language!r}; pysbd has {', '.join(sorted(LANGUAGE_CODES))}. "
            "Pass one of those, or split_sentences=False."
        )
    return pysbd.Segmenter(language=language, clean=False)


def rule_based_sentences(text: str, language: str = "en") -> list[str]:
    """The sentences of one paragraph, by the rules of `language` (an ISO 639-1 code pysbd knows)."""
    return [sentence.strip() for sentence in _segmenter(language).segment(text) if sentence.strip()]


def register_sentence_splitter() -> None:
    SENTENCE_SPLITTERS["pysbd"] = rule_based_sentences
