"""Train and load BPE tokenizers: the joint BPE over words that a task gets by default
(`train_bpe_tokenizer`, translation's), and the parts a task's own tokenizer is built from (`bpe_trainer`,
`train_bpe`, `wrap_tokenizer`; the series task's is in `tasks/series/tokenizer.py`).

Each is a `tokenizers` model wrapped in `transformers.PreTrainedTokenizerFast` and saved with
`save_pretrained`, so a plain `AutoTokenizer.from_pretrained(folder)` loads them (no custom code).
They share four special tokens with fixed ids, which the model config relies on
(`pad_token_id=0`, `bos_token_id=decoder_start_token_id=1`, `eos_token_id=2`):

    <pad> = 0   padding, ignored by attention
    <s>   = 1   decoder start token (labels shifted right start with it)
    </s>  = 2   end of sequence, appended to every encoded text by the post-processor
    <unk> = 3   characters never seen in training

    >>> tokenizer = train_bpe_tokenizer(["train.de.gz", "train.en.gz"], vocab_size=8000)
    >>> batch = tokenizer("Ein Hund rennt.", text_target="A dog runs.")  # labels end with </s> too
    >>> tokenizer.decode(batch["labels"], skip_special_tokens=True)
    'A dog runs.'
"""

from __future__ import annotations

import itertools
import logging
import os
import statistics
import string
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
from tokenizers.trainers import BpeTrainer
from transformers import PreTrainedTokenizerBase, PreTrainedTokenizerFast

from .errors import MissingPathError, UsageError
from .readers import iter_text_lines
from .saving import check_tokenizer_location, load_folder_tokenizer

logger = logging.getLogger(__name__)

PAD_TOKEN, BOS_TOKEN, EOS_TOKEN, UNK_TOKEN = "<pad>", "<s>", "</s>", "<unk>"
PAD_TOKEN_ID, BOS_TOKEN_ID, EOS_TOKEN_ID, UNK_TOKEN_ID = 0, 1, 2, 3
# The trainer gives special tokens the first ids in list order, so position == id.
SPECIAL_TOKENS = (PAD_TOKEN, BOS_TOKEN, EOS_TOKEN, UNK_TOKEN)

# Should equal the model's `max_position_embeddings` (VanillaTransformerConfig's default is 1024):
# `tokenizer.model_max_length` is what data pipelines check lengths against.
DEFAULT_MODEL_MAX_LENGTH = 1024

# SentencePiece's word-boundary marker: "▁Hund" is "Hund" at the start of a word.
METASPACE = "\u2581"

# Printable ASCII but whitespace (Metaspace turns spaces into "▁") is always in a word tokenizer's alphabet:
# an ASCII letter missing from a small corpus (a "Q" in Multi30k's first lines) still decodes instead of
# becoming <unk>.
WORD_ALPHABET = tuple(string.ascii_letters + string.digits + string.punctuation)
# With `split_punctuation`, each punctuation character is its own pre-token, keeping the "▁" of a preceding
# space ("▁Fahrrad", "." and "▁(", "x", ")"): merges cannot glue punctuation to words, so "Fahrrad." does
# not spend a vocabulary entry beside "Fahrrad". Standard MT pipelines split punctuation before BPE likewise
# (Moses' tokenizer); here the split is undone exactly by the Metaspace decoder.
PUNCTUATION_PATTERN = METASPACE + r"?\p{P}"

TextSource = str | os.PathLike | Sequence[str | os.PathLike] | Iterable[str]


def iter_corpus(files_or_iterator: TextSource, skip_blank: bool = True) -> Iterator[str]:
    """Yield training texts from text files (gzip or not) or from an iterable of strings.

    A path or a list/tuple of paths is read as files, one text a line; any other iterable (a generator,
    `iter(list_of_texts)`, a dataset column) is taken as the texts themselves. Blank lines are skipped.
    Files are read by `readers.iter_text_lines` (gzip, bzip2 or xz told by their first bytes); missing,
    empty, non-UTF-8 and cut-short files, and folders, raise errors naming the file.
    """
    if isinstance(files_or_iterator, str | os.PathLike):
        files_or_iterator = [files_or_iterator]
    if isinstance(files_or_iterator, list | tuple):
        if not files_or_iterator:
            raise UsageError("No corpus files given; pass at least one text file.")
        for path in files_or_iterator:
            if Path(path).is_dir():
                raise UsageError(f"Corpus file '{path}' is a folder: give the text files in it.")
            if not Path(path).is_file():
                raise MissingPathError(
                    f"Corpus file '{path}' does not exist. (A list or tuple is read as file paths; to train "
                    "on texts in memory, pass an iterator such as `iter(texts)`.)"
                )
        for path in files_or_iterator:
            num_texts = 0
            for line in iter_text_lines(path):
                if skip_blank and not line.strip():
                    continue
                num_texts += 1
                yield line
            if num_texts == 0:
                raise UsageError(f"Corpus file '{path}' is empty (no non-blank lines); remove it or fill it.")
        return
    for text in files_or_iterator:
        if not isinstance(text, str):
            raise TypeError(f"Expected an iterable of strings, got an item of type {type(text).__name__}.")
        if skip_blank and not text.strip():
            continue
        yield text


def iter_dataset_texts(dataset, columns: Sequence[str], batch_size: int = 1000) -> Iterator[str]:
    """Yield the texts in `columns` of a `datasets.Dataset`, e.g. to train a tokenizer on a split.

    A column of `{language: sentence}` dicts (the Hub's `translation` column) yields each sentence, so a
    translation corpus gives one joint stream of source and target text.
    """
    missing = [column for column in columns if column not in dataset.column_names]
    if missing:
        raise UsageError(
            f"Column(s) {', '.join(missing)} not in the dataset; columns found: "
            f"{', '.join(dataset.column_names)}."
        )
    for batch in dataset.select_columns(list(columns)).iter(batch_size=batch_size):
        for column in columns:
            for value in batch[column]:
                if isinstance(value, dict):
                    yield from (text for text in value.values() if text is not None)
                else:
                    yield value


def check_vocab_size(vocab_size: int, alphabet_size: int = 0) -> None:
    """Fail before training when `vocab_size` cannot even hold the special tokens and fixed alphabet."""
    minimum = len(SPECIAL_TOKENS) + alphabet_size + 1  # + 1: at least one merge, or BPE is pointless
    if not isinstance(vocab_size, int) or vocab_size < minimum:
        raise UsageError(
            f"vocab_size={vocab_size!r} is too small: it must exceed the {len(SPECIAL_TOKENS)} special "
            f"tokens plus the {alphabet_size} characters always in the alphabet. Use vocab_size >= {minimum} "
            "(a few thousand for translation, around a thousand for series)."
        )


def bpe_trainer(
    vocab_size: int, min_frequency: int, alphabet: Sequence[str], show_progress: bool
) -> BpeTrainer:
    """The BPE trainer both tokenizers use: special tokens first (so position == id), the alphabet always
    in."""
    return BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=list(alphabet),
        show_progress=show_progress,
    )


def train_bpe(
    tokenizer: Tokenizer, files_or_iterator: TextSource, trainer: BpeTrainer, vocab_size: int
) -> None:
    """Train `tokenizer` in place, then check that the corpus and `vocab_size` made sense."""
    texts = iter_corpus(files_or_iterator)
    # Reading errors (a missing or non-UTF-8 file) propagate unchanged, from here or out of the Rust trainer.
    first = next(texts, None)
    if first is None:
        raise UsageError("The training corpus is empty: it yielded no non-blank text.")
    tokenizer.train_from_iterator(itertools.chain([first], texts), trainer=trainer)
    # The trainer keeps every character it saw even when that overshoots `vocab_size`; a vocabulary
    # with no room left for merges is a character-level tokenizer in disguise.
    trained_size = tokenizer.get_vocab_size()
    if trained_size > vocab_size:
        raise UsageError(
            f"vocab_size={vocab_size} is smaller than the corpus alphabet: the {len(SPECIAL_TOKENS)} special "
            f"tokens and the characters seen in training already take {trained_size} entries. Use a "
            f"vocab_size well above {trained_size}."
        )
    for token_id, token in enumerate(SPECIAL_TOKENS):
        assert tokenizer.token_to_id(token) == token_id, f"{token} got id {tokenizer.token_to_id(token)}"


def wrap_tokenizer(tokenizer: Tokenizer, model_max_length: int) -> PreTrainedTokenizerFast:
    """Append `</s>` to every sequence and wrap for transformers."""
    # A pair ("$A </s> $B </s>") is never fed to this model but `tokenizers` wants a template for it.
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"$A {EOS_TOKEN}",
        pair=f"$A {EOS_TOKEN} $B {EOS_TOKEN}",
        special_tokens=[(EOS_TOKEN, EOS_TOKEN_ID)],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        pad_token=PAD_TOKEN,
        bos_token=BOS_TOKEN,
        eos_token=EOS_TOKEN,
        unk_token=UNK_TOKEN,
        model_max_length=model_max_length,
        # The decoders below already produce the exact text; transformers' clean-up would then remove
        # spaces before punctuation ("a , b" -> "a, b") and break the round trip.
        clean_up_tokenization_spaces=False,
    )


def train_bpe_tokenizer(
    files_or_iterator: TextSource,
    vocab_size: int = 8000,
    *,
    min_frequency: int = 2,
    split_punctuation: bool = False,
    model_max_length: int = DEFAULT_MODEL_MAX_LENGTH,
    show_progress: bool = True,
    output_dir: str | os.PathLike | None = None,
) -> PreTrainedTokenizerFast:
    """Train one joint BPE vocabulary over source and target text (paper §5.1: "shared source-target
    vocabulary"), which lets the model tie its embedding and output matrices.

    Text is NFKC-normalised (so "ﬁ" and "fi", non-breaking and plain spaces, share tokens); the
    Metaspace pre-tokenizer turns spaces into "▁" word-start markers, so `decode` rebuilds detokenised
    text exactly: `decode(encode(s), skip_special_tokens=True) == s` for any NFKC-normal sentence without
    leading or repeated spaces whose characters are printable ASCII or were seen in training (others
    become `<unk>`).

    Args:
        files_or_iterator: text files (a path or a list of paths, gzip or not, one sentence a line)
            holding both languages, or an iterator of sentences (see `iter_corpus`).
        vocab_size: size of the vocabulary, special tokens included; more than 98 (4 special tokens + 94
            printable ASCII characters) plus the corpus's other characters. Multi30k (29k pairs): ~8000.
            The paper used 37000 for WMT14 English-German.
        min_frequency: a pair of tokens seen fewer times is never merged.
        split_punctuation: make every punctuation character a token boundary before BPE
            (`PUNCTUATION_PATTERN`), so no token mixes letters and punctuation; decoding stays exact.
        model_max_length: longest sequence the model accepts (its `max_position_embeddings`).
        show_progress: show the trainer's progress bars.
        output_dir: if given, `save_pretrained` the tokenizer there.
    """
    check_vocab_size(vocab_size, alphabet_size=len(WORD_ALPHABET))
    tokenizer = Tokenizer(models.BPE(unk_token=UNK_TOKEN))
    tokenizer.normalizer = normalizers.NFKC()
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement=METASPACE, prepend_scheme="always")
    if split_punctuation:
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
            [tokenizer.pre_tokenizer, pre_tokenizers.Split(Regex(PUNCTUATION_PATTERN), behavior="isolated")]
        )
    tokenizer.decoder = decoders.Metaspace(replacement=METASPACE, prepend_scheme="always")
    trainer = bpe_trainer(vocab_size, min_frequency, WORD_ALPHABET, show_progress)
    train_bpe(tokenizer, files_or_iterator, trainer, vocab_size)
    wrapped = wrap_tokenizer(tokenizer, model_max_length)
    if output_dir is not None:
        wrapped.save_pretrained(output_dir)
    return wrapped


def load_tokenizer(
    name_or_path: str | os.PathLike, expected: dict[str, int | None] | None = None
) -> PreTrainedTokenizerBase:
    """`AutoTokenizer.from_pretrained`, plus a check that the special-token ids are the ones the model
    config expects: `expected` (e.g. `{"pad": config.pad_token_id, "eos": config.eos_token_id}`), by default
    this package's pad 0, bos 1, eos 2, unk 3. A mistyped folder is named, not sent to the Hub."""
    check_tokenizer_location(name_or_path)
    tokenizer = load_folder_tokenizer(name_or_path)
    if expected is None:
        expected = {"pad": PAD_TOKEN_ID, "bos": BOS_TOKEN_ID, "eos": EOS_TOKEN_ID, "unk": UNK_TOKEN_ID}
    found = {name: getattr(tokenizer, f"{name}_token_id") for name in expected}
    if found != expected:
        raise UsageError(
            f"Tokenizer '{name_or_path}' has special-token ids {found}, but the model config expects "
            f"{expected}. Retrain it with scripts/train_tokenizer.py, or set the config's "
            "pad/bos/eos/decoder_start token ids to match."
        )
    return tokenizer


def sequence_length_report(tokenizer: PreTrainedTokenizerBase, texts: Iterable[str]) -> dict[str, float]:
    """Compare token counts with a character-level tokenisation (one token per character) on `texts`.

    Counts exclude the `</s>` the tokenizer appends (the model sees one more token). The series tutorial
    this project follows used characters as tokens: ~142 per target.

    Returns:
        `num_texts`, `avg_tokens`, `max_tokens`, `avg_chars`, `max_chars` and `chars_per_token`
        (compression: how many times shorter than character-level).
    """
    texts = list(texts)
    if not texts:
        raise UsageError("No texts to measure; pass at least one string.")
    num_tokens = [len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]
    num_chars = [len(text) for text in texts]
    return {
        "num_texts": len(texts),
        "avg_tokens": statistics.fmean(num_tokens),
        "max_tokens": max(num_tokens),
        "avg_chars": statistics.fmean(num_chars),
        "max_chars": max(num_chars),
        "chars_per_token": sum(num_chars) / max(sum(num_tokens), 1),
    }


__all__ = [
    "BOS_TOKEN",
    "BOS_TOKEN_ID",
    "DEFAULT_MODEL_MAX_LENGTH",
    "EOS_TOKEN",
    "EOS_TOKEN_ID",
    "PAD_TOKEN",
    "PAD_TOKEN_ID",
    "PUNCTUATION_PATTERN",
    "SPECIAL_TOKENS",
    "WORD_ALPHABET",
    "UNK_TOKEN",
    "UNK_TOKEN_ID",
    "iter_corpus",
    "iter_dataset_texts",
    "load_tokenizer",
    "sequence_length_report",
    "bpe_trainer",
    "check_vocab_size",
    "train_bpe",
    "train_bpe_tokenizer",
    "wrap_tokenizer",
]
