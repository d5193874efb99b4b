"""A document into sentences and back, for models trained on single sentences: a paragraph given whole loses
sentences, so it is translated sentence by sentence and joined again with its line breaks.

Sentences are cut by pysbd's rules for the source language (a rule-based sentence boundary detector made for
this, knowing each language's abbreviations and dates: "am 3. Mai" is one sentence in German, three in
English; pure Python, nothing to download). A language asked for by name must be one pysbd has rules for; a
model's recorded source language without rules, or any language where pysbd is not installed, is cut at
sentence-final punctuation instead (`plain_sentences`).

It is also the one home of how a text is read (`normalize_text`, `normalize_line`): the pipeline and every
reader of the package's files take a text through it, so that a byte-order mark or a line end of another
system gives the same translation as the plain text.

This file imports only the standard library (and pysbd where it is installed): the pipeline a saved folder
carries imports it, and a torch-free CTranslate2 service loads it by path.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache

try:  # in a try block: transformers then does not require pysbd to load a folder's pipeline
    import pysbd
    from pysbd.languages import LANGUAGE_CODES
except ImportError:
    pysbd, LANGUAGE_CODES = None, {}

# The rules used when neither the caller nor the model names a source language.
DEFAULT_LANGUAGE = "en"

# Line ends other than "\n" in the texts users hand over: Windows' CRLF, a lone CR (old Mac files), NEL
# (U+0085, from EBCDIC conversions) and Unicode's LINE and PARAGRAPH SEPARATORs (U+2028, U+2029, which word
# processors and web pages paste).
_LINE_ENDS = re.compile("\r\n|[\r\x85\u2028\u2029]")
# A vertical tab and a form feed (U+000B, U+000C) separate words, not lines: `wc -l`, git and Python's text
# files break no line at them (only `str.splitlines` does), and a form feed between pages is a space between
# sentences. Left in, a tokenizer reads each as an unknown token.
_SPACES = str.maketrans("\x0b\x0c", "  ")
# A byte-order mark is no text, and `cat a.txt b.txt` puts the second file's at the start of a line.
_MARKS = re.compile("^\ufeff", re.MULTILINE)
_TO_NORMALIZE = re.compile("[\r\x0b\x0c\x85\u2028\u2029\ufeff]")


def normalize_text(text: str) -> str:
    """`text` as the pipeline and the package's readers take it: every line end "\\n" (CRLF, a lone CR,
    NEL, U+2028 and U+2029 included), a vertical tab or a form feed a space, and a UTF-8 byte-order mark at
    the start of a line dropped. Unchanged otherwise, so that a text translates as the same words typed
    plainly."""
    if _TO_NORMALIZE.search(text) is None:  # nearly every text: nothing to copy
        return text
    return _MARKS.sub("", _LINE_ENDS.sub("\n", text).translate(_SPACES))


def normalize_line(line: str) -> str:
    """A line of a file (without its end) as `normalize_text` takes it, kept one line: a line end inside it
    (a lone CR, U+2028, ...) is a space, so that a file's lines are those `wc -l` counts, one output for
    each."""
    return normalize_text(line).replace("\n", " ")


def plain_sentences(text: str) -> list[str]:
    """Sentences of one paragraph, cut after ".", "!" or "?" where white space and a capital letter, a
    digit or an opening quote follow: the fallback that needs nothing (it also cuts after "Dr.")."""
    pieces = re.split(r"(?<=[.!?])\s+(?=[\"'„“«(\[0-9A-ZÀ-ÖØ-Þ])", text.strip())
    return [piece for piece in pieces if piece]


def sentence_rules(asked: str | None, languages: list[str] | None = None) -> str | None:
    """Whose rules split a text: the language `asked` for (refused, naming the choices, if there are no rules
    for it), else the source language of a model's recorded `languages` (its config's `langs`: source, target)
    if there are rules for it, else English for a model that records none. `None` means "cut at punctuation"
    (`plain_sentences`), as it does wherever pysbd is not installed."""
    if pysbd is None:
        return None
    if asked is not None:
        if asked not in LANGUAGE_CODES:
            raise ValueError(
                f"No sentence rules for source_lang={asked!r}; pysbd has "
                f"{', '.join(sorted(LANGUAGE_CODES))}. Pass one of those, or split_sentences=False."
            )
        return asked
    if not languages:
        return DEFAULT_LANGUAGE
    return languages[0] if languages[0] in LANGUAGE_CODES else None


@cache
def _segmenter(language: str):
    return pysbd.Segmenter(language=language, clean=False)


def paragraph_sentences(text: str, language: str | None) -> list[str]:
    """The sentences of one paragraph, by `language`'s rules (`sentence_rules`; `None`: at punctuation)."""
    pieces = plain_sentences(text) if language is None else _segmenter(language).segment(text)
    return [piece.strip() for piece in pieces if piece.strip()]


def split_document(text: str, language: str | None) -> list[str | list[str]]:
    """`text` as its line breaks (strings, kept as they are) between lists of the sentences of each line."""
    parts: list[str | list[str]] = []
    for index, part in enumerate(re.split(r"(\s*\n\s*)", text)):
        if index % 2:
            parts.append(part)
        elif part.strip():
            parts.append(paragraph_sentences(part, language))
    return parts


def document_sentences(document: list[str | list[str]]) -> list[str]:
    """The sentences of a `split_document` result, in order."""
    return [sentence for part in document if isinstance(part, list) for sentence in part]


def join_document(document: list[str | list[str]], outputs: Iterator[str]) -> str:
    """`document` with each of its sentences replaced by the next of `outputs`, its line breaks kept."""
    return "".join(
        part if isinstance(part, str) else " ".join(next(outputs) for _ in part) for part in document
    )


def translate_documents(documents: list[list[str | list[str]]], translate) -> list[str]:
    """Each `split_document` result translated sentence by sentence and joined again. `translate(sentences)
    -> outputs` is called once, with every sentence of every document, longest first (neighbours in a batch
    then pad little, and the first batch shows the memory a run needs)."""
    sentences = [sentence for document in documents for sentence in document_sentences(document)]
    order = sorted(range(len(sentences)), key=lambda i: -len(sentences[i]))
    translated = [""] * len(sentences)
    for index, output in zip(order, translate([sentences[i] for i in order]), strict=True):
        translated[index] = output.strip()
    pending = iter(translated)
    return [join_document(document, pending) for document in documents]
