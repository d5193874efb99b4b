"""Tests for hf_vanilla_transformer.tokenization: special tokens, round trips, reproducibility, bad input."""

import gzip
import json
import unicodedata
from pathlib import Path

import pytest
from tokenizers import Tokenizer, models
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from hf_vanilla_transformer.tasks.series.grammar import DIGIT_SPLIT_PATTERN, FUNCTIONS
from hf_vanilla_transformer.tasks.series.tokenizer import train_series_tokenizer, tutorial_series_tokenizer
from hf_vanilla_transformer.tasks.translation.data import iter_text_lines
from hf_vanilla_transformer.tokenization import (
    BOS_TOKEN_ID,
    EOS_TOKEN_ID,
    PAD_TOKEN_ID,
    SPECIAL_TOKENS,
    UNK_TOKEN_ID,
    iter_dataset_texts,
    load_tokenizer,
    sequence_length_report,
    train_bpe_tokenizer,
)

from .script_runner import run_script_file

FIXTURE = Path(__file__).parent / "fixtures" / "multi30k"
TRAIN_FILES = [FIXTURE / "train.de.gz", FIXTURE / "train.en.gz"]

# (expression, series to order 6) pairs printed by sympy, the format the series task uses.
SERIES_PAIRS = [
    ("(exp(3*a*x) - sin(c*x)/sinh(g*x))*exp(-a*x)", "1 + x*(a*c/g + 2*a) + x**2*(-a**2/2 + b) + O(x**6)"),
    ("tanh(f*x)", "f*x - f**3*x**3/3 + 2*f**5*x**5/15 + O(x**6)"),
    (
        "cos(a*x) + tan(g*x) + exp(b*x)",
        "2 + x**2*(-a**2/2 + b**2/2) + x**4*(a**4/24 + b**4/24) + g*x + g**3*x**3/3 + O(x**6)",
    ),
    ("sin(d*x) - tanh(b*x)", "x*(-b + d) + x**3*(b**3/3 - d**3/6) + x**5*(-2*b**5/15 + d**5/120) + O(x**6)"),
    (
        "-sin(a*x) + sin(2*d*x) - sinh(c*x)",
        "x*(-a - c + 2*d) + x**3*(a**3/6 - c**3/6 - 4*d**3/3) + x**5*(-a**5/120 - c**5/120 + 4*d**5/15) + "
        "O(x**6)",
    ),
    ("cos(d*x) + exp(f*x)", "2 + x**2*(-d**2/2 + f**2/2) + x**4*(d**4/24 + f**4/24) + O(x**6)"),
    (
        "exp(c*x) - tanh(3*d*x)",
        "1 + x*(c - 3*d) + x**3*(c**3/6 + 9*d**3) + c**2*x**2/2 + c**4*x**4/24 + O(x**6)",
    ),
    ("-tan(a*x)", "-a*x - a**3*x**3/3 - 2*a**5*x**5/15 + O(x**6)"),
    ("sin(2*g*x)", "2*g*x - 4*g**3*x**3/3 + 4*g**5*x**5/15 + O(x**6)"),
    (
        "tan(3*f*x) - sinh(b*x)",
        "x*(-b + 3*f) + x**3*(-b**3/6 + 9*f**3) + x**5*(-b**5/120 + 162*f**5/5) + O(x**6)",
    ),
]
# Note: "cosh" occurs in none of these, so the tests can check that an unseen function name stays whole.
SERIES_TEXTS = [text for pair in SERIES_PAIRS for text in pair]


def read_fixture(name):
    return list(iter_text_lines(FIXTURE / name))


@pytest.fixture(scope="module")
def translation_tokenizer():
    return train_bpe_tokenizer(TRAIN_FILES, vocab_size=400, show_progress=False, model_max_length=128)


@pytest.fixture(scope="module")
def series_tokenizer():
    # Repeat the texts so that min_frequency=2 lets merges happen on this tiny corpus.
    return train_series_tokenizer(iter(SERIES_TEXTS * 3), vocab_size=200, show_progress=False)


# ---------------------------------------------------------------------------- special tokens and loading


@pytest.mark.parametrize("which", ["translation", "series"])
def test_special_tokens_have_the_fixed_ids(which, translation_tokenizer, series_tokenizer):
    tokenizer = translation_tokenizer if which == "translation" else series_tokenizer
    assert tokenizer.convert_tokens_to_ids(list(SPECIAL_TOKENS)) == [0, 1, 2, 3]
    assert (
        tokenizer.pad_token_id,
        tokenizer.bos_token_id,
        tokenizer.eos_token_id,
        tokenizer.unk_token_id,
    ) == (
        PAD_TOKEN_ID,
        BOS_TOKEN_ID,
        EOS_TOKEN_ID,
        UNK_TOKEN_ID,
    )


def test_saved_tokenizer_loads_with_auto_tokenizer(translation_tokenizer, tmp_path):
    translation_tokenizer.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)  # no trust_remote_code
    assert loaded.is_fast
    assert loaded.model_max_length == 128
    source, target = "Zwei Hunde spielen im Schnee.", "Two dogs play in the snow."
    batch = loaded(source, text_target=target)
    assert batch["input_ids"] == translation_tokenizer(source)["input_ids"]
    # The post-processor appends </s> to inputs and labels alike, and adds nothing in front.
    assert batch["input_ids"][-1] == EOS_TOKEN_ID and batch["labels"][-1] == EOS_TOKEN_ID
    assert EOS_TOKEN_ID not in batch["labels"][:-1] and BOS_TOKEN_ID not in batch["labels"]
    assert loaded.decode(batch["labels"], skip_special_tokens=True) == target
    assert load_tokenizer(tmp_path).get_vocab() == loaded.get_vocab()


def test_load_tokenizer_rejects_other_special_token_ids(tmp_path):
    vocab = {"<unk>": 0, "<pad>": 1, "<s>": 2, "</s>": 3, "a": 4}
    other = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>")),
        pad_token="<pad>",
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
    )
    other.save_pretrained(tmp_path)
    with pytest.raises(ValueError, match=r"special-token ids .*'pad': 1"):
        load_tokenizer(tmp_path)


# ---------------------------------------------------------------------------- translation


def test_translation_round_trip_on_unseen_sentences(translation_tokenizer):
    sentences = read_fixture("val.de.gz") + read_fixture("val.en.gz") + read_fixture("test_2016_flickr.en.gz")
    # Normal sentences: NFKC-normal, no leading/trailing or repeated spaces (nearly all of Multi30k).
    normal = [s for s in sentences if unicodedata.normalize("NFKC", s) == s and " ".join(s.split()) == s]
    assert len(normal) >= 0.95 * len(sentences)
    for sentence in normal:
        ids = translation_tokenizer(sentence)["input_ids"]
        assert translation_tokenizer.decode(ids, skip_special_tokens=True) == sentence


def test_translation_vocabulary_is_joint_and_uses_word_boundaries(translation_tokenizer):
    tokens = translation_tokenizer.tokenize("Ein Mann und ein Hund.")
    assert tokens[0].startswith("\u2581")  # SentencePiece-style word-start marker
    vocab = translation_tokenizer.get_vocab()
    assert "\u2581Mann" in vocab and "\u2581man" in vocab  # German and English share one vocabulary
    assert len(vocab) == 400


def test_translation_tokenizer_normalises_nfkc(translation_tokenizer):
    # The ligature "ﬁ" and a non-breaking space become "fi" and a plain space.
    assert (
        translation_tokenizer("ﬁve\u00a0dogs")["input_ids"] == translation_tokenizer("five dogs")["input_ids"]
    )


def test_split_punctuation_keeps_punctuation_out_of_words_and_decodes_exactly(translation_tokenizer):
    tokenizer = train_bpe_tokenizer(
        TRAIN_FILES, vocab_size=400, split_punctuation=True, show_progress=False, model_max_length=128
    )
    punctuation = set('.,;:!?"()-')
    mixed = [
        token.lstrip("\u2581")
        for token in tokenizer.get_vocab()
        if set(token) & punctuation and set(token.lstrip("\u2581")) - punctuation
    ]
    assert mixed == []
    # Without the option, merges glue the fixture's full stops to words.
    assert any(token.endswith(".") and len(token) > 2 for token in translation_tokenizer.get_vocab())
    assert tokenizer.tokenize("Ein Hund (braun) rennt.")[-1] == "."
    sentences = read_fixture("val.de.gz") + read_fixture("val.en.gz") + ['T-Shirt, man\'s "quote" (x) ...']
    normal = [s for s in sentences if unicodedata.normalize("NFKC", s) == s and " ".join(s.split()) == s]
    for sentence in normal:
        assert tokenizer.decode(tokenizer(sentence)["input_ids"], skip_special_tokens=True) == sentence


def test_training_is_reproducible_and_files_equal_texts(tmp_path):
    train_bpe_tokenizer(TRAIN_FILES, vocab_size=300, show_progress=False, output_dir=tmp_path / "a")
    train_bpe_tokenizer(TRAIN_FILES, vocab_size=300, show_progress=False, output_dir=tmp_path / "b")
    texts = [line for path in TRAIN_FILES for line in iter_text_lines(path)]
    train_bpe_tokenizer(iter(texts), vocab_size=300, show_progress=False, output_dir=tmp_path / "c")
    first = (tmp_path / "a" / "tokenizer.json").read_bytes()
    assert first == (tmp_path / "b" / "tokenizer.json").read_bytes()
    assert first == (tmp_path / "c" / "tokenizer.json").read_bytes()
    # And the comparison can fail: another vocabulary size gives another file.
    train_bpe_tokenizer(TRAIN_FILES, vocab_size=310, show_progress=False, output_dir=tmp_path / "d")
    assert first != (tmp_path / "d" / "tokenizer.json").read_bytes()


# ---------------------------------------------------------------------------- series


@pytest.mark.parametrize(
    "text",
    SERIES_TEXTS
    + [
        "  tanh(x)  +  y ",  # leading, trailing and repeated spaces
        "sinhtanh(coshx)",  # names glued together
        "a~b|c`d{e}[f]",  # ASCII characters that never occur in training
        "x\t+\ny",  # whitespace other than spaces
        "",
    ],
)
def test_series_round_trip_is_exact(series_tokenizer, text):
    ids = series_tokenizer(text)["input_ids"]
    assert ids[-1] == EOS_TOKEN_ID
    assert UNK_TOKEN_ID not in ids
    assert series_tokenizer.decode(ids, skip_special_tokens=True) == text


def test_series_function_names_are_single_tokens(series_tokenizer):
    for name in FUNCTIONS:  # "cosh" included, which the training corpus lacks
        assert name in series_tokenizer.tokenize(f"2*{name}(a*x)")
    assert series_tokenizer.tokenize("sinh(x)")[0] == "sinh"  # the longest name wins over "sin"


def test_series_merges_stay_inside_terms(series_tokenizer):
    vocab = series_tokenizer.get_vocab()
    assert "x**3*(" in vocab  # merges run across operators and parentheses within a term...
    for token in vocab:
        # ...but never across a binary " + "/" - " or a function name.
        assert " + " not in token or token == " + "
        assert " - " not in token or token == " - "
        assert not any(name in token for name in FUNCTIONS) or token in FUNCTIONS


def test_series_coefficients_are_never_fused_with_their_monomial(series_tokenizer):
    pre_tokenize = series_tokenizer.backend_tokenizer.pre_tokenizer.pre_tokenize_str
    chunks = [chunk for chunk, _ in pre_tokenize("64*a**5*x**5/15 - 9*g**12/8 + x**3*(-13*c/(2*d))")]
    # Numerators and "/denominator" stand alone; exponents ("**12" too) stay with their monomial. BPE
    # merges only inside a chunk, so no token can fuse a coefficient with what it multiplies.
    assert chunks == [
        "64", "*a**5*x**5", "/15", " - ", "9", "*g**12", "/8", " + ", "x**3*(-", "13", "*c/(", "2", "*d))",
    ]  # fmt: skip


def test_series_digit_tokenizer_writes_integers_digit_by_digit():
    tokenizer = train_series_tokenizer(
        iter(SERIES_TEXTS * 3), vocab_size=200, integer_digits=True, show_progress=False
    )
    pre_tokenize = tokenizer.backend_tokenizer.pre_tokenizer.pre_tokenize_str
    chunks = [
        chunk for chunk, _ in pre_tokenize("64*a**5*x**5/15 - 9*g**12/8 + x**3*(-13*c/(2*d)) - g**10/(512*d)")
    ]
    # Every digit of a numerator or denominator stands alone, and so does a denominator's slash; exponents
    # ("**12", "**10" too) stay with their monomial.
    assert chunks == [
        "6", "4", "*a**5*x**5", "/", "1", "5", " - ", "9", "*g**12", "/", "8", " + ", "x**3*(-", "1", "3",
        "*c/(", "2", "*d))", " - ", "g**10/(", "5", "1", "2", "*d)",
    ]  # fmt: skip
    for text in SERIES_TEXTS:
        assert tokenizer.decode(tokenizer(text)["input_ids"], skip_special_tokens=True) == text
    # No token holds two digits of an integer, so the vocabulary has no "64" or "/15".
    integer_tokens = [token for token in tokenizer.get_vocab() if token.lstrip("/").isdigit()]
    assert integer_tokens and all(len(token.lstrip("/")) == 1 for token in integer_tokens)


def test_series_training_is_reproducible(series_tokenizer, tmp_path):
    again = train_series_tokenizer(iter(SERIES_TEXTS * 3), vocab_size=200, show_progress=False)
    series_tokenizer.save_pretrained(tmp_path / "a")
    again.save_pretrained(tmp_path / "b")
    assert (tmp_path / "a" / "tokenizer.json").read_bytes() == (
        tmp_path / "b" / "tokenizer.json"
    ).read_bytes()


def test_sequence_length_report(series_tokenizer):
    targets = [series for _, series in SERIES_PAIRS]
    report = sequence_length_report(series_tokenizer, targets)
    assert report["num_texts"] == len(targets)
    assert report["avg_chars"] == pytest.approx(sum(map(len, targets)) / len(targets))
    expected_tokens = [len(series_tokenizer(t, add_special_tokens=False)["input_ids"]) for t in targets]
    assert report["avg_tokens"] == pytest.approx(sum(expected_tokens) / len(targets))  # </s> not counted
    assert report["chars_per_token"] > 3  # BPE shortens the sequences several times over
    with pytest.raises(ValueError, match="No texts"):
        sequence_length_report(series_tokenizer, [])


# ---------------------------------------------------------------------------- bad input


def test_missing_corpus_file_is_named(tmp_path):
    missing = tmp_path / "nope.txt"
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        train_bpe_tokenizer([FIXTURE / "train.de.gz", missing], vocab_size=300, show_progress=False)


def test_empty_corpus_file_is_named(tmp_path):
    empty = tmp_path / "empty.en"
    empty.write_text("\n  \n", encoding="utf-8")  # blank lines only
    with pytest.raises(ValueError, match=r"empty\.en' is empty"):
        train_bpe_tokenizer([FIXTURE / "train.de.gz", empty], vocab_size=300, show_progress=False)


def test_empty_iterator_is_rejected():
    with pytest.raises(ValueError, match="corpus is empty"):
        train_series_tokenizer(iter([]), vocab_size=200, show_progress=False)


def test_non_utf8_corpus_file_is_named_with_its_line(tmp_path):
    latin1 = tmp_path / "latin1.de.gz"
    with gzip.open(latin1, "wb") as f:
        f.write("Ein Hund.\nZwei Männer.\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"latin1\.de\.gz' is not valid UTF-8: line 2 .*iconv"):
        train_bpe_tokenizer(latin1, vocab_size=300, show_progress=False)


def test_vocab_smaller_than_alphabet_is_rejected():
    # 4 special tokens + 94 ASCII characters fit in 100, but not with the fixture's "ä", "ö", "ü", "ß", "Ü".
    with pytest.raises(ValueError, match=r"vocab_size=100 is smaller than the corpus alphabet"):
        train_bpe_tokenizer(TRAIN_FILES, vocab_size=100, show_progress=False)
    # The fixed alphabets (printable ASCII) are caught before training.
    with pytest.raises(ValueError, match=r"vocab_size=50 is too small.*vocab_size >= 99"):
        train_bpe_tokenizer(TRAIN_FILES, vocab_size=50, show_progress=False)
    with pytest.raises(ValueError, match=r"vocab_size=100 is too small.*vocab_size >= 105"):
        train_series_tokenizer(iter(SERIES_TEXTS), vocab_size=100, show_progress=False)


def test_iter_dataset_texts_flattens_translation_dicts_and_names_missing_columns():
    from datasets import Dataset

    dataset = Dataset.from_dict({"translation": [{"de": "Hund", "en": "dog"}], "id": ["0"]})
    assert list(iter_dataset_texts(dataset, ["translation"])) == ["Hund", "dog"]
    with pytest.raises(ValueError, match="columns found: translation, id"):
        list(iter_dataset_texts(dataset, ["expression", "series"]))


def test_series_round_trip_on_a_whole_generated_data_set(tmp_path):
    """Every string of every split of a freshly generated data set decodes back exactly (the README reports
    the same check on the 50,000-example set)."""
    from datasets import load_from_disk

    from hf_vanilla_transformer.tasks.series.dataset import generate_series_dataset

    generate_series_dataset(tmp_path / "data", 300, seed=5, test_size=60, validation_size=30, progress=False)
    data = load_from_disk(str(tmp_path / "data"))
    tokenizers = {
        f"bpe, integer_digits={integer_digits}": train_series_tokenizer(
            (text for row in data["train"] for text in (row["expression"], row["series"])),
            vocab_size=300,
            integer_digits=integer_digits,
            show_progress=False,
        )
        for integer_digits in (False, True)
    }
    tutorial_series_tokenizer(output_dir=tmp_path / "tutorial")
    tokenizers["tutorial"] = AutoTokenizer.from_pretrained(tmp_path / "tutorial")
    for name, tokenizer in tokenizers.items():
        for split in data.values():
            texts = [*split["expression"], *split["series"]]
            ids = tokenizer(texts)["input_ids"]
            assert tokenizer.batch_decode(ids, skip_special_tokens=True) == texts, name
            assert not any(tokenizer.unk_token_id in sequence for sequence in ids), name


def test_tutorial_tokenizer_has_the_tutorials_tokens_and_lengths():
    """One token per function name, symbol, digit, operator and O(x**6); lengths are the tutorial's, minus its
    start token (the model's decoder start token is not part of the text)."""
    from hf_vanilla_transformer.tasks.series.grammar import tutorial_length

    tokenizer = tutorial_series_tokenizer()
    text = "sinh(2*g*x)**3 - 12*a/g + O(x**6)"
    tokens = tokenizer.convert_ids_to_tokens(tokenizer(text)["input_ids"])
    assert tokens == [
        "sinh", "(", "2", "*", "g", "*", "x", ")", "**", "3", " - ", "1", "2", "*", "a", "/", "g", " + ",
        "O(x**6)", "</s>",
    ]  # fmt: skip
    assert len(tokens) + 1 == tutorial_length(text)
    assert (
        len(tokenizer) == 37
        and tokenizer.pad_token_id == PAD_TOKEN_ID
        and tokenizer.unk_token_id == UNK_TOKEN_ID
    )


def test_train_tokenizer_script_integer_digits(tmp_path):
    corpus = tmp_path / "series.txt"
    corpus.write_text("\n".join(SERIES_TEXTS * 3) + "\n")
    common = ["train_tokenizer.py", "--vocab_size", "200", "--text_files", corpus, "--integer_digits"]
    made = run_script_file(*common, "--task", "series", "--output_dir", tmp_path / "tok", cwd=tmp_path)
    assert made.returncode == 0, made.stderr[-3000:]
    saved = json.loads((tmp_path / "tok" / "tokenizer.json").read_text())
    assert saved["pre_tokenizer"]["pattern"]["Regex"] == DIGIT_SPLIT_PATTERN
    refused = run_script_file(*common, "--task", "translation", "--output_dir", tmp_path / "no", cwd=tmp_path)
    assert refused.returncode != 0 and "`integer_digits` applies to the series task only" in refused.stderr
    assert not (tmp_path / "no").exists()


def test_train_tokenizer_script_writes_the_tutorial_vocabulary(tmp_path):
    """The tutorial's tokenizer from the command line: nothing learned, every string of every split
    round-trips, and it is refused for translation."""
    from hf_vanilla_transformer.tasks.series.dataset import generate_series_dataset

    generate_series_dataset(tmp_path / "data", 120, seed=2, test_size=20, validation_size=10, progress=False)
    common = ["train_tokenizer.py", "--tutorial_vocabulary", "--dataset", tmp_path / "data"]
    result = run_script_file(*common, "--task", "series", "--output_dir", tmp_path / "tok", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    for split, size in (("train", 90), ("validation", 10), ("test", 20)):
        assert f"{split}: decode(encode(s)) == s for {2 * size} of {2 * size} strings" in result.stdout
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "tok")
    assert len(tokenizer) == 37 and "O(x**6)" in tokenizer.get_vocab()
    refused = run_script_file(*common, "--task", "translation", "--output_dir", tmp_path / "no", cwd=tmp_path)
    assert (
        refused.returncode != 0 and "`tutorial_vocabulary` applies to the series task only" in refused.stderr
    )
