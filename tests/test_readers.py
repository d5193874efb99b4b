"""Every file a command reads goes through one reader per format (`readers`: text lines, JSON; `data.files`: a
data set's parquet, JSON Lines, CSV and Arrow files), and each refuses what it cannot read in one line naming
the file: missing, a folder, not UTF-8, compressed in a way it cannot read, cut short, empty where that is an
error. The text faults run through every command's way in to the text reader (a matrix of reader x fault), so
a reader added to the table is tested against all of them."""

import bz2
import contextlib
import functools
import gzip
import io
import json
import lzma
import os
import signal
import threading
import zipfile
from pathlib import Path

import datasets
import pytest

from hf_vanilla_transformer.decoding import lines as input_lines
from hf_vanilla_transformer.errors import CorruptFileError, MissingPathError, UsageError, UserError
from hf_vanilla_transformer.readers import count_text_lines, iter_stream_lines, iter_text_lines, read_json
from hf_vanilla_transformer.tasks.translation.data import load_parallel_text, load_translation_dataset
from hf_vanilla_transformer.tokenization import iter_corpus

from .fault_matrix import sha
from .script_runner import run_script_file

LINES = ["Ein Hund läuft.", "Zwei Männer sitzen.", "", "Eine Katze schläft im Park.", "Ende."]
TEXT = "".join(f"{line}\n" for line in LINES).encode("utf-8")
PAIRED = [f"line {number}" for number in range(len(LINES))]  # the other side of a parallel file


def _cut(data: bytes) -> bytes:
    return data[: len(data) // 2]


def _zip(data: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("text.de", data)
    return buffer.getvalue()


# ---------------------------------------------------------------------------- the text reader, every way in

# The commands' ways in to the text reader: each reads the file at `path` (named `train.de`, as parallel text
# is) and returns its lines.


def _translate_input(path: Path) -> list[str]:
    """scripts/translate.py --input: counted (and checked) before the model loads, then read a window at a
    time."""
    count = input_lines.count_lines(path)
    lines = list(input_lines.read_lines([path]))
    assert count == len(lines)
    return lines


def _parallel_text(path: Path) -> list[str]:
    """--dataset of a folder of line-aligned text (prepare_translation.py, train.py, evaluate_model.py)."""
    (path.parent / "train.en").write_text("".join(f"{line}\n" for line in PAIRED), encoding="utf-8")
    pairs = load_parallel_text(path.parent, "de", "en", split_files={"train": "train"})["train"]
    return [pair["de"] for pair in pairs["translation"]]


def _tokenizer_corpus(path: Path) -> list[str]:
    """scripts/train_tokenizer.py --text_files: the texts a tokenizer is trained on."""
    return list(iter_corpus([path]))


TEXT_READERS = {"translate.py --input": _translate_input, "parallel text": _parallel_text}
TEXT_READERS["tokenizer training"] = _tokenizer_corpus
# What each reader gives of LINES: the parallel text drops pairs with an empty side, the corpus blank lines.
READ_AS = {
    "translate.py --input": LINES,
    "parallel text": [line for line in LINES if line],
    "tokenizer training": [line for line in LINES if line],
}

# Bytes that read as LINES, whatever the file's name says.
READABLE = {
    "plain": TEXT,
    "gzip, no .gz in the name": gzip.compress(TEXT, mtime=0),
    "bzip2": bz2.compress(TEXT),
    "xz": lzma.compress(TEXT),
    "byte-order mark and CRLF": b"\xef\xbb\xbf" + TEXT.replace(b"\n", b"\r\n"),
    # Read as the pipeline reads a text (`sentences.normalize_text`), kept a line for a line: another line end
    # inside a line is a space, and a mark at the start of any line (files joined by `cat`) is dropped.
    "U+2028, U+2029, NEL, a lone CR, VT and FF between words": (
        "Ein\u2028Hund läuft.\nZwei\rMänner\x85sitzen.\n\nEine\u2029Katze\x0bschläft\x0cim Park.\nEnde.\n"
    ).encode("utf-8"),
    "a byte-order mark on every line": "".join(f"\ufeff{line}\n" for line in LINES).encode("utf-8"),
}
# Bytes that are refused: (their error's type, what its message says besides the file's name).
REFUSED = {
    "gzip cut short": (_cut(gzip.compress(TEXT * 200, mtime=0)), CorruptFileError, "gzip data cut short"),
    "latin-1": (TEXT.decode("utf-8").encode("latin-1"), UsageError, "line 1 has byte 0xe4 at byte offset 10"),
    "cut inside a character": (TEXT[: TEXT.index("ä".encode()) + 1], CorruptFileError, "ends inside a UTF-8"),
    "zip archive": (_zip(TEXT), UsageError, "is a zip archive, not text"),
}


@pytest.mark.parametrize("reader", TEXT_READERS)
@pytest.mark.parametrize("kind", READABLE)
def test_every_text_reader_reads_compressed_and_marked_text_as_its_lines(tmp_path, reader, kind):
    path = tmp_path / "train.de"
    path.write_bytes(READABLE[kind])
    assert TEXT_READERS[reader](path) == READ_AS[reader]


@pytest.mark.parametrize("reader", TEXT_READERS)
@pytest.mark.parametrize("fault", REFUSED)
def test_every_text_reader_refuses_a_fault_in_one_line_naming_the_file(tmp_path, reader, fault):
    data, error_type, says = REFUSED[fault]
    path = tmp_path / "train.de"
    path.write_bytes(data)
    with pytest.raises(error_type) as raised:
        TEXT_READERS[reader](path)
    message = str(raised.value)
    assert str(path) in message and says in message and "\n" not in message, message
    assert isinstance(raised.value, UserError)


@pytest.mark.parametrize("reader", ["translate.py --input", "tokenizer training"])
def test_a_folder_or_nothing_where_a_text_file_is_wanted_is_named(tmp_path, reader):
    with pytest.raises(UsageError, match="is a folder"):
        TEXT_READERS[reader](tmp_path)
    with pytest.raises(MissingPathError, match="missing.de"):
        TEXT_READERS[reader](tmp_path / "missing.de")


def test_empty_text_is_refused_where_it_is_an_error_and_not_elsewhere(tmp_path):
    path = tmp_path / "train.de"
    path.write_bytes(b"")
    assert _translate_input(path) == []  # nothing to translate: an empty output
    with pytest.raises(ValueError, match="train.de' is empty"):
        _tokenizer_corpus(path)
    (tmp_path / "train.en").write_bytes(b"")
    with pytest.raises(
        UsageError, match=r"train\.de' and '.*train\.en' are empty: a split is pairs of lines"
    ):
        load_parallel_text(tmp_path, "de", "en", split_files={"train": "train"})


def test_the_count_checks_a_whole_file_before_any_line_is_used(tmp_path):
    """A fault at the end of a file of many chunks is found by the count, with the line the reader names."""
    good = "".join(f"Zeile {number} für alle\n" for number in range(200_000)).encode("utf-8")
    (tmp_path / "late.txt").write_bytes(good + "Männer\n".encode("latin-1"))
    with pytest.raises(UsageError, match=r"late\.txt' is not valid UTF-8: line 200001 has byte 0xe4 at byte"):
        count_text_lines(tmp_path / "late.txt")
    (tmp_path / "late.gz").write_bytes(_cut(gzip.compress(good, mtime=0)))
    with pytest.raises(CorruptFileError, match=r"late\.gz' is gzip data cut short or damaged after line \d+"):
        count_text_lines(tmp_path / "late.gz")
    (tmp_path / "whole.gz").write_bytes(gzip.compress(good + b"no end", mtime=0))
    assert (
        count_text_lines(tmp_path / "whole.gz")
        == 200_001
        == sum(1 for _ in iter_text_lines(tmp_path / "whole.gz"))
    )


def test_standard_input_is_decompressed_and_checked_as_a_file_is():
    for compress in (functools.partial(gzip.compress, mtime=0), bz2.compress, lzma.compress):
        compressed = io.BufferedReader(io.BytesIO(compress(TEXT)))
        assert list(iter_stream_lines(compressed)) == LINES
    latin = io.BufferedReader(io.BytesIO(TEXT.decode("utf-8").encode("latin-1")))
    with pytest.raises(UsageError, match="standard input is not valid UTF-8: line 1"):
        list(iter_stream_lines(latin))


# ---------------------------------------------------------------------------- JSON


def test_json_that_does_not_parse_is_named_with_the_fix(tmp_path):
    path = tmp_path / "config.json"
    for data, detail in ((b'{"a": [1, 2', "Expecting"), (b"", "it is empty"), (b"\xff{}", "codec")):
        path.write_bytes(data)
        with pytest.raises(CorruptFileError) as raised:
            read_json(path, "Save it again")
        message = str(raised.value)
        assert message.startswith(f"{path} is truncated or corrupt: it does not parse as JSON (")
        assert detail in message and message.endswith("Save it again.")
    path.write_text('{"a": 1}', encoding="utf-8")
    assert read_json(path, "Save it again") == {"a": 1}
    with pytest.raises(MissingPathError):
        read_json(tmp_path / "none.json", "Save it again")


# ---------------------------------------------------------------------------- a data set's files

ROWS = [{"de": f"Ein Satz {number} für alle", "en": f"Sentence {number} for all"} for number in range(400)]


def _jsonl(rows) -> bytes:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode("utf-8")


def _damaged_line(rows) -> bytes:
    lines = _jsonl(rows).split(b"\n")
    lines[200] = lines[200][:20]  # a line cut in half in the middle of the file
    return b"\n".join(lines)


def _parquet(rows, path: Path) -> bytes:
    datasets.Dataset.from_list(rows).to_parquet(path)
    return path.read_bytes()


# Data files of a folder (name: how to make the broken train file, what the error says of it).
DATA_FAULTS = {
    "parquet cut short": (
        "train.parquet",
        lambda path: _cut(_parquet(ROWS, path)),
        "does not read as parquet",
    ),
    "JSON Lines cut short": ("train.jsonl", lambda path: _cut(_jsonl(ROWS)), "its last line does not parse"),
    "JSON Lines line cut in half": (
        "train.jsonl",
        lambda path: _damaged_line(ROWS),
        "line 201 does not parse",
    ),
    "JSON Lines empty": ("train.jsonl", lambda path: b"", "it is empty"),
    "CSV row damaged": (
        "train.csv",
        lambda path: (
            "de,en\n" + "".join(f"{r['de']},{r['en']}\n" for r in ROWS[:50]) + "a,b,c\nd,e\n"
        ).encode(),
        "does not read as CSV",
    ),
}


@pytest.mark.parametrize("streaming", [False, True], ids=["loaded", "streamed"])
@pytest.mark.parametrize("fault", DATA_FAULTS)
def test_a_data_file_that_does_not_read_is_named_loaded_or_streamed(tmp_path, fault, streaming):
    name, make, says = DATA_FAULTS[fault]
    folder = tmp_path / "corpus"
    folder.mkdir()
    broken = folder / name
    broken.write_bytes(make(broken))
    validation = folder / f"validation{broken.suffix}"  # the splits of a folder are of one format
    if broken.suffix == ".parquet":
        _parquet(ROWS[:5], validation)
    else:
        validation.write_text("de,en\nEin Hund,A dog\n" if broken.suffix == ".csv" else json.dumps(ROWS[0]))
    options = {"streaming": True} if streaming else {"cache_dir": str(tmp_path / "cache")}
    with pytest.raises(CorruptFileError) as raised:
        loaded = load_translation_dataset(folder, languages=("de", "en"), **options)
        list(loaded["train"])  # a stream is read as it is used: the error comes while reading
    message = str(raised.value)
    assert message.startswith(f"{broken} is truncated or corrupt: ") and says in message, message
    assert message.endswith("Download or make it again.") and "\n" not in message


def test_whole_data_files_load_and_stream(tmp_path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "train.jsonl").write_bytes(_jsonl(ROWS))
    (folder / "validation.jsonl").write_bytes(_jsonl(ROWS[:5])[:-1])  # a last line without its line end
    loaded = load_translation_dataset(folder, languages=("de", "en"), cache_dir=str(tmp_path / "cache"))
    assert loaded["train"].num_rows == len(ROWS)
    streamed = load_translation_dataset(folder, languages=("de", "en"), streaming=True)
    assert next(iter(streamed["train"]))["translation"] == ROWS[0]


def _data_lines(suffix: str, rows=ROWS) -> list[str]:
    """`rows` as the lines of a JSON Lines or CSV file."""
    if suffix == ".csv":
        return ["de,en\n", *(f"{row['de']},{row['en']}\n" for row in rows)]
    return [json.dumps(row, ensure_ascii=False) + "\n" for row in rows]


def _latin1_line(suffix: str, number: int = 201) -> tuple[bytes, int]:
    """A data file of `ROWS` in UTF-8 (JSON Lines or CSV) but for line `number`, in Latin-1 (a row pasted from
    another file), and the byte offset in that line of its first byte that is no UTF-8 ("ü")."""
    lines = _data_lines(suffix)
    encoded = [line.encode("utf-8") for line in lines]
    encoded[number - 1] = lines[number - 1].encode("latin-1")
    return b"".join(encoded), encoded[number - 1].index("ü".encode("latin-1"))


@pytest.mark.parametrize("streaming", [False, True], ids=["loaded", "streamed"])
@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_a_data_file_not_in_utf8_is_named_with_its_line_and_the_fix_loaded_or_streamed(
    tmp_path, suffix, streaming
):
    """`datasets` hands a JSON Lines file's bytes to pyarrow unchecked: without the check, the data set loads,
    and its text fails in whatever reads it next (train_tokenizer.py's UnicodeDecodeError)."""
    folder = tmp_path / "corpus"
    folder.mkdir()
    broken = folder / f"train{suffix}"
    data, offset = _latin1_line(suffix)
    broken.write_bytes(data)
    (folder / f"validation{suffix}").write_text("".join(_data_lines(suffix, ROWS[:5])), encoding="utf-8")
    options = {"streaming": True} if streaming else {"cache_dir": str(tmp_path / "cache")}
    with pytest.raises(UsageError) as raised:
        load_translation_dataset(folder, languages=("de", "en"), **options)
    assert str(raised.value) == (
        f"'{broken}' is not valid UTF-8: line 201 has byte 0xfc at byte offset {offset}. Re-encode the file "
        "as UTF-8, e.g. `iconv -f latin1 -t utf-8`."
    )
    assert not (tmp_path / "cache").exists()  # refused before `datasets` read any of it


def test_a_data_file_that_ends_inside_a_utf8_character_is_named_cut_short(tmp_path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    broken = folder / "train.jsonl"
    data = _jsonl(ROWS)
    broken.write_bytes(data[: data.index("ü".encode()) + 1])  # "ü" is two bytes: the cut falls between them
    with pytest.raises(
        CorruptFileError, match=r"train\.jsonl' is cut short: its last line \(line 1\) ends inside"
    ):
        load_translation_dataset(folder, languages=("de", "en"), streaming=True)


def test_text_data_files_of_another_encoding_named_to_datasets_are_read_in_it(tmp_path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    rows = [{"de": "Zwei Männer", "en": "Two men"}, {"de": "Ein Hund", "en": "A dog"}]
    (folder / "train.csv").write_bytes("de,en\nZwei Männer,Two men\nEin Hund,A dog\n".encode("latin-1"))
    loaded = load_translation_dataset(
        folder, languages=("de", "en"), encoding="latin-1", cache_dir=str(tmp_path / "cache")
    )
    assert [row["translation"] for row in loaded["train"]] == rows


SAVED_FAULTS = {
    "an Arrow file cut short": ("train/data-00000-of-00001.arrow", "does not read as Arrow"),
    "state.json cut short": ("train/state.json", "does not parse as JSON"),
    "dataset_info.json cut short": ("train/dataset_info.json", "does not parse as JSON"),
    "dataset_dict.json cut short": ("dataset_dict.json", "does not parse as JSON"),
}


@pytest.mark.parametrize("fault", SAVED_FAULTS)
def test_a_save_to_disk_folder_with_a_file_cut_short_is_named(tmp_path, fault):
    name, says = SAVED_FAULTS[fault]
    folder = tmp_path / "saved"
    datasets.DatasetDict(
        train=datasets.Dataset.from_list([{"translation": row} for row in ROWS]),
        validation=datasets.Dataset.from_list([{"translation": row} for row in ROWS[:5]]),
    ).save_to_disk(folder)
    (folder / name).write_bytes(_cut((folder / name).read_bytes()))
    with pytest.raises(CorruptFileError) as raised:
        load_translation_dataset(folder, languages=("de", "en"))
    message = str(raised.value)
    assert message.startswith(f"{folder / name} is truncated or corrupt: ") and says in message, message
    assert message.endswith(f"Make the data set {folder} again.") and "\n" not in message


def test_prepare_translation_names_a_data_file_cut_short_in_one_line(tmp_path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    broken = folder / "train.parquet"
    broken.write_bytes(_cut(_parquet(ROWS, broken)))
    (folder / "validation.jsonl").write_bytes(_jsonl(ROWS[:5]))
    result = run_script_file(
        "prepare_translation.py", "--dataset", folder, "--source_lang", "de", "--target_lang", "en",
        "--output_dir", tmp_path / "out", cwd=tmp_path,
    )  # fmt: skip
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert lines[-1].startswith(f"error: {broken} is truncated or corrupt: it does not read as parquet")
    assert not (tmp_path / "out").exists()


def test_prepare_translation_names_a_data_file_not_in_utf8_in_one_line(tmp_path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    broken = folder / "train.jsonl"
    data, offset = _latin1_line(".jsonl")
    broken.write_bytes(data)
    (folder / "validation.jsonl").write_bytes(_jsonl(ROWS[:5]))
    before = sha(tmp_path)
    result = run_script_file(
        "prepare_translation.py", "--dataset", folder, "--source_lang", "de", "--target_lang", "en",
        "--output_dir", tmp_path / "out", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.stderr.strip().splitlines() == [
        f"error: '{broken}' is not valid UTF-8: line 201 has byte 0xfc at byte offset {offset}. Re-encode "
        "the file as UTF-8, e.g. `iconv -f latin1 -t utf-8`."
    ]
    assert sha(tmp_path) == before and sorted(tmp_path.iterdir()) == [folder]  # nothing written


def test_compressed_json_is_read_as_the_json_it_holds_unless_another_library_reads_it_next(tmp_path):
    path = tmp_path / "overrides.json"
    path.write_bytes(gzip.compress(b'{"dropout": 0.0}', mtime=0))
    assert read_json(path, "Write it again") == {"dropout": 0.0}
    with pytest.raises(
        CorruptFileError, match="overrides.json is truncated or corrupt: it does not parse as JSON"
    ):
        read_json(path, "Write it again", decompress=False)
    path.write_bytes(_cut(gzip.compress(b'{"dropout": 0.0, "x": "' + b"y" * 5000 + b'"}', mtime=0)))
    with pytest.raises(CorruptFileError, match="overrides.json is gzip data cut short or damaged"):
        read_json(path, "Write it again")


def test_a_file_where_a_folder_is_wanted_is_named(tmp_path):
    from hf_vanilla_transformer.saving import check_model_location
    from hf_vanilla_transformer.tokenization import load_tokenizer

    path = tmp_path / "train.jsonl"
    path.write_bytes(_jsonl(ROWS[:3]))
    with pytest.raises(UsageError, match=r"train\.jsonl' is a file, not a dataset folder: pass the folder"):
        load_translation_dataset(path, languages=("de", "en"))
    with pytest.raises(
        UsageError, match=r"train\.jsonl is a file, not a saved model folder: give the folder"
    ):
        check_model_location(path)
    with pytest.raises(UsageError, match=r"train\.jsonl is a file, not a saved tokenizer folder"):
        load_tokenizer(path)


def test_a_whole_text_is_read_as_its_lines_are(tmp_path):
    from hf_vanilla_transformer.readers import read_text

    path = tmp_path / "card.md"
    path.write_bytes(gzip.compress(b"\xef\xbb\xbf" + TEXT, mtime=0))
    assert read_text(path) == TEXT.decode("utf-8")
    path.write_bytes(b"# A card\n\nIt translates.\n" + "Männer\n".encode("latin-1"))
    with pytest.raises(
        UsageError, match=r"card\.md' is not valid UTF-8: line 4 has byte 0xe4 at byte offset 1\."
    ):
        read_text(path)


def test_a_model_card_is_read_through_the_text_reader(tmp_path):
    """push_to_hub.py --card: a compressed card is the card it holds; one that is not UTF-8, or empty, is
    named."""
    import torch

    from hf_vanilla_transformer import VanillaTransformerForConditionalGeneration
    from hf_vanilla_transformer.interop.hub import build_hub_folder
    from hf_vanilla_transformer.saving import save_model_folder

    from .conftest import make_word_tokenizer, tiny_config

    torch.manual_seed(0)
    model = VanillaTransformerForConditionalGeneration(tiny_config()).eval()
    model_dir = save_model_folder(model, make_word_tokenizer(), tmp_path / "model")
    text = "---\nlicense: apache-2.0\n---\n# Ein Modell\n\nEs übersetzt.\n"
    card = tmp_path / "card.md"
    card.write_bytes(gzip.compress(text.encode("utf-8"), mtime=0))
    folder = build_hub_folder(model_dir, tmp_path / "hub", card=card)
    assert (folder / "README.md").read_text(encoding="utf-8") == text
    card.write_bytes(text.encode("latin-1"))
    with pytest.raises(UsageError, match=r"card\.md' is not valid UTF-8: line 6 has byte 0xfc"):
        build_hub_folder(model_dir, tmp_path / "hub2", card=card)
    card.write_bytes(b"\n")
    with pytest.raises(UsageError, match=r"card\.md is empty: write one"):
        build_hub_folder(model_dir, tmp_path / "hub2", card=card)


# ---------------------------------------------------------------------------- text as the pipeline reads it


def test_a_whole_text_keeps_its_line_breaks_as_newlines(tmp_path):
    from hf_vanilla_transformer.readers import read_text

    path = tmp_path / "card.md"
    path.write_bytes("\ufeff# Karte\r\n\r\nEin Hund\u2028läuft.\rEnde.\x0cSeite 2\n".encode())
    assert read_text(path) == "# Karte\n\nEin Hund\nläuft.\nEnde. Seite 2\n"


# ---------------------------------------------------------------------------- pipes and FIFOs


@contextlib.contextmanager
def fed_fifo(path: Path, data: bytes, seconds: int = 120):
    """A FIFO at `path`, as `<(zcat news.gz)` hands one to a command: a thread writes `data` into it once a
    reader opens it. A reader that opened it twice (a probe, then the read) would wait for ever for a second
    writer: the test fails after `seconds` instead."""
    if not path.exists():
        os.mkfifo(path)

    def feed():
        with contextlib.suppress(BrokenPipeError), open(path, "wb") as fifo:
            fifo.write(data)

    def waited_too_long(signum, frame):
        raise TimeoutError(f"{path} was not read once through within {seconds} s")

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    previous = signal.signal(signal.SIGALRM, waited_too_long)
    signal.alarm(seconds)
    try:
        yield path
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        if writer.is_alive():  # never opened, or not read to the end: let the writer's open and write return
            os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK))
        writer.join(10)


def test_a_fifo_is_read_once_as_a_stream(tmp_path):
    """A pipe or a FIFO is no regular file: every reader takes it, reads it once (its compression told from
    the bytes it holds back), and refuses its faults as a file's; counting it first, which would empty it, is
    refused in one line."""
    from hf_vanilla_transformer.cli import read_recipe_file
    from hf_vanilla_transformer.readers import read_text

    with fed_fifo(tmp_path / "plain", TEXT) as fifo:
        assert list(iter_text_lines(fifo)) == LINES
    with fed_fifo(tmp_path / "gzipped", gzip.compress(TEXT, mtime=0)) as fifo:
        assert list(input_lines.read_lines([fifo])) == LINES
    with fed_fifo(tmp_path / "card", READABLE["byte-order mark and CRLF"]) as fifo:
        assert read_text(fifo) == TEXT.decode("utf-8")
    with fed_fifo(tmp_path / "overrides.json", bz2.compress(b'{"dropout": 0.0}')) as fifo:
        assert read_json(fifo, "Write it again") == {"dropout": 0.0}
    with fed_fifo(tmp_path / "recipe.yaml", b"learning_rate: 0.001\r\nmax_steps: 10\r\n") as fifo:
        assert read_recipe_file(fifo) == {"learning_rate": 0.001, "max_steps": 10}
    with fed_fifo(tmp_path / "latin", TEXT.decode("utf-8").encode("latin-1")) as fifo:
        with pytest.raises(UsageError, match=r"latin' is not valid UTF-8: line 1 has byte 0xe4 at byte"):
            list(iter_text_lines(fifo))
    with fed_fifo(tmp_path / "counted", TEXT) as fifo:
        with pytest.raises(UsageError) as raised:
            count_text_lines(fifo, "--input file")
        assert str(raised.value) == (
            f"--input file {fifo} is a pipe or a device, which can be read only once, so not counted before "
            "it is read: give a regular file."
        )
