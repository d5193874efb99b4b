"""BLEU as "Attention Is All You Need" computed its 27.3 and 28.4 on newstest2014: tokenized BLEU with
compounds split, which is higher than sacreBLEU on the same output and not comparable with it.

The paper's figures came from tensor2tensor's `get_ende_bleu.sh`, which does three things to the
detokenised output and the reference alike:

1. tokenizes with Moses' `tokenizer.perl -l <target language>` (default settings: HTML-escaping on, no
   aggressive hyphen splitting); here `sacremoses`, its Python port;
2. splits hyphenated compounds, `perl -ple 's{(\\S)-(\\S)}{$1 ##AT##-##AT## $2}g'`, so that "rich-text"
   becomes "rich ##AT##-##AT## text" (as GNMT and ConvS2S reported; the Perl substitution and `re.sub`
   both take non-overlapping matches left to right, so "a-b-c" becomes "a ##AT##-##AT## b-c" in both);
3. scores with Moses' `multi-bleu.perl`: case-sensitive corpus BLEU on the whitespace tokens, without
   smoothing; here sacrebleu with `tokenize="none"` and `smooth_method="none"`, which computes the same.

>>> tokenized_bleu(["Das ist ein Test-Fall."], ["Das ist ein Test-Fall."], "de")["score"]
100.0
>>> split_compounds("rich-text format")
'rich ##AT##-##AT## text format'
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib.metadata import version

from ...metrics import check_pairs

_COMPOUND = re.compile(r"(\S)-(\S)")

DESCRIPTION = (
    "tokenized BLEU as the paper computed it (tensor2tensor's get_ende_bleu.sh): Moses tokenizer.perl "
    "-l {lang} (sacremoses {sacremoses}), hyphenated compounds split as ##AT##-##AT##, multi-bleu.perl "
    "(sacrebleu {sacrebleu}, tokenize=none, no smoothing); not comparable with sacreBLEU"
)


def split_compounds(text: str) -> str:
    """`perl -ple 's{(\\S)-(\\S)}{$1 ##AT##-##AT## $2}g'` on one line."""
    return _COMPOUND.sub(r"\1 ##AT##-##AT## \2", text)


@lru_cache(maxsize=8)
def _moses_tokenizer(lang: str):
    from sacremoses import MosesTokenizer

    return MosesTokenizer(lang=lang)


def paper_tokenize(text: str, lang: str) -> str:
    """Steps 1 and 2: Moses tokenization for `lang`, then compound splitting."""
    tokenized = _moses_tokenizer(lang).tokenize(text, return_str=True, escape=True)
    return split_compounds(tokenized)


def tokenized_bleu(predictions: list[str], references: list[str], lang: str) -> dict:
    """The paper's BLEU of detokenised `predictions` against one detokenised reference each, in target
    language `lang`: `{"score": 0-100, "signature": what was computed, with the library versions}`."""
    from sacrebleu.metrics import BLEU

    check_pairs(predictions, references, "BLEU")
    hypotheses = [paper_tokenize(text, lang) for text in predictions]
    tokenized_references = [paper_tokenize(text, lang) for text in references]
    bleu = BLEU(tokenize="none", smooth_method="none", force=True)
    score = bleu.corpus_score(hypotheses, [tokenized_references])
    return {
        "score": score.score,
        "signature": DESCRIPTION.format(
            lang=lang, sacremoses=version("sacremoses"), sacrebleu=version("sacrebleu")
        ),
    }


__all__ = ["DESCRIPTION", "paper_tokenize", "split_compounds", "tokenized_bleu"]
