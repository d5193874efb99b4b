"""The series task's tokenizers: a BPE over the grammar's chunks (`train_series_tokenizer`), and the fixed
character-level vocabulary of Judge & Prosper's tutorial (`tutorial_series_tokenizer`). Both share the special
tokens and ids of every tokenizer of the package (`tokenization`) and decode exactly."""

from __future__ import annotations

import os
import string
from collections.abc import Sequence

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from ...tokenization import (
    DEFAULT_MODEL_MAX_LENGTH,
    SPECIAL_TOKENS,
    UNK_TOKEN,
    TextSource,
    bpe_trainer,
    check_vocab_size,
    train_bpe,
    wrap_tokenizer,
)
from .grammar import (
    DIGIT_SPLIT_PATTERN,
    FUNCTIONS,
    SPLIT_PATTERN,
    TUTORIAL_TOKEN_PATTERN,
    TUTORIAL_VOCABULARY,
)

# Printable ASCII (letters, digits, punctuation, whitespace) is always in the series alphabet, so every
# ASCII expression round-trips exactly, even with a character the training corpus lacked.
SERIES_ALPHABET = tuple(string.printable)


def train_series_tokenizer(
    files_or_iterator: TextSource,
    vocab_size: int = 1000,
    *,
    min_frequency: int = 2,
    function_names: Sequence[str] = FUNCTIONS,
    integer_digits: bool = False,
    model_max_length: int = DEFAULT_MODEL_MAX_LENGTH,
    show_progress: bool = True,
    output_dir: str | os.PathLike | None = None,
) -> PreTrainedTokenizerFast:
    """Train a BPE vocabulary over math expressions and their series, e.g.
    `(exp(3*a*x) - sin(c*x)/sinh(g*x))*exp(-a*x)` -> `1 + x*(a*c/g + 2*a) + ... + O(x**6)`.

    Decoding is exact: `decode(encode(s), skip_special_tokens=True) == s` for every printable-ASCII
    string (no normaliser, and a decoder that only concatenates tokens); other characters become `<unk>`.
    Merges stay inside the chunks of `grammar.SPLIT_PATTERN` (a monomial such as `*a**2*x**2`, a
    numerator `64`, a denominator `/15`), and each of `function_names` is always a single token.

    Args:
        files_or_iterator: text files (one expression or series a line) or an iterator of strings; train on
            inputs and targets together, since the model shares one vocabulary.
        vocab_size: size of the vocabulary, special tokens included; more than 104 (4 special tokens +
            100 printable ASCII characters). Around 1000 suits series of order 6.
        min_frequency: a pair of tokens seen fewer times is never merged.
        function_names: names that must stay whole; added as tokens if BPE did not learn them.
        integer_digits: split integers into digits (`grammar.DIGIT_SPLIT_PATTERN`) instead of
            letting BPE learn whole integers (`SPLIT_PATTERN`).
        model_max_length, show_progress, output_dir: as in `tokenization.train_bpe_tokenizer`.
    """
    check_vocab_size(vocab_size, alphabet_size=len(SERIES_ALPHABET))
    tokenizer = Tokenizer(models.BPE(unk_token=UNK_TOKEN))
    split_pattern = DIGIT_SPLIT_PATTERN if integer_digits else SPLIT_PATTERN
    tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex(split_pattern), behavior="isolated")
    tokenizer.decoder = decoders.Fuse()  # concatenate: no space is added or removed
    trainer = bpe_trainer(vocab_size, min_frequency, SERIES_ALPHABET, show_progress)
    train_bpe(tokenizer, files_or_iterator, trainer, vocab_size)
    # Added tokens are matched (longest first, so "sinh" before "sin") before BPE runs. A name BPE already
    # learned keeps its id; only names that were split grow the vocabulary, by at most len(function_names).
    tokenizer.add_tokens([AddedToken(name, normalized=False, special=False) for name in function_names])
    wrapped = wrap_tokenizer(tokenizer, model_max_length)
    if output_dir is not None:
        wrapped.save_pretrained(output_dir)
    return wrapped


def tutorial_series_tokenizer(
    model_max_length: int = DEFAULT_MODEL_MAX_LENGTH, output_dir: str | os.PathLike | None = None
) -> PreTrainedTokenizerFast:
    """The character-level vocabulary of Judge & Prosper's series tutorial, as a tokenizer that
    `AutoTokenizer` loads like the trained ones: function names, symbols, single digits, operators and
    `O(x**6)` each one token (`grammar.TUTORIAL_TOKEN_PATTERN`), the same special tokens and ids.

    Nothing is learned, so there is nothing to train. Decoding is exact for every text of the series grammar
    (`decode(encode(s), skip_special_tokens=True) == s`); any other character becomes `<unk>`.
    """
    vocab = {token: token_id for token_id, token in enumerate((*SPECIAL_TOKENS, *TUTORIAL_VOCABULARY))}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token=UNK_TOKEN))
    tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex(TUTORIAL_TOKEN_PATTERN), behavior="isolated")
    tokenizer.decoder = decoders.Fuse()  # concatenate: the spaces live inside the " + " and " - " tokens
    wrapped = wrap_tokenizer(tokenizer, model_max_length)
    if output_dir is not None:
        wrapped.save_pretrained(output_dir)
    return wrapped
