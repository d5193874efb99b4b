"""scripts/translate.py: files in, translations out, a line for a line. Lines come back in input order
whatever they were batched with; no more than a window of lines is held; an interrupted output is continued to
what an uninterrupted run writes, and a file the command did not start is not replaced; stdin to stdout; two
processes under `accelerate launch` write what one writes; the CTranslate2 backend; a line as a text of
sentences."""

import functools
import gzip
import io
import json
import random
import shutil
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch

from hf_vanilla_transformer import VanillaTransformerForConditionalGeneration
from hf_vanilla_transformer.decoding import backends, translating, windows
from hf_vanilla_transformer.decoding.arguments import TranslateArguments
from hf_vanilla_transformer.decoding.generation import EXTRA_OUTPUT_TOKENS
from hf_vanilla_transformer.decoding.lines import line_windows
from hf_vanilla_transformer.decoding.record import RECORD_SUFFIX
from hf_vanilla_transformer.decoding.windows import translate_lines
from hf_vanilla_transformer.errors import UsageError
from hf_vanilla_transformer.saving import save_model_folder

from .conftest import WORDS, make_word_tokenizer, tiny_config
from .script_runner import SCRIPTS, run_code, run_script_file
from .test_readers import fed_fifo
from .test_scale_out import accelerate_launch

POSITIONS = 64
ONE_THREAD = {"OMP_NUM_THREADS": "1"}  # as each process under accelerate launch has it: the same arithmetic


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory):
    """A tiny random model of the word tokenizer: its outputs differ from line to line, and most run to their
    length bound, so a bound taken from another line would show."""
    tokenizer = make_word_tokenizer()
    torch.manual_seed(0)
    config = tiny_config(
        vocab_size=len(tokenizer), max_position_embeddings=POSITIONS, langs=["de", "en"], task="translation"
    )
    folder = tmp_path_factory.mktemp("translate") / "model"
    save_model_folder(VanillaTransformerForConditionalGeneration(config).eval(), tokenizer, folder)
    return folder


# The source length the model of `trained_limit_folder` records it was trained with: far below its positions.
TRAINED_SOURCE = 8


@pytest.fixture(scope="module")
def trained_limit_folder(tmp_path_factory):
    """`model_folder`'s model (the same weights), recording that it was trained on sources of at most
    `TRAINED_SOURCE` tokens, as training records it."""
    tokenizer = make_word_tokenizer()
    torch.manual_seed(0)
    config = tiny_config(
        vocab_size=len(tokenizer), max_position_embeddings=POSITIONS, langs=["de", "en"], task="translation"
    )
    config.max_source_length, config.max_target_length = TRAINED_SOURCE, 12
    folder = tmp_path_factory.mktemp("trained-limit") / "model"
    save_model_folder(VanillaTransformerForConditionalGeneration(config).eval(), tokenizer, folder)
    return folder


def _words(count: int, seed: int) -> str:
    return " ".join(random.Random(seed).choices(WORDS, k=count))


def _lines(count: int, seed: int = 0) -> list[str]:
    """Lines of 1 to 30 words, a blank one among them: lengths that sorting regroups."""
    rng = random.Random(seed)
    lines = [" ".join(rng.choices(WORDS, k=rng.choice([1, 2, 5, 12, 30]))) for _ in range(count)]
    lines[3] = ""
    return lines


def _write(path, lines: list[str]):
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


def _translate(cwd, *args, check=True):
    result = run_script_file("translate.py", *args, cwd=cwd, env=ONE_THREAD)
    if check:
        assert result.returncode == 0, result.stderr[-3000:]
    return result


def _output_lines(path) -> list[str]:
    return path.read_text(encoding="utf-8").split("\n")[:-1]


def _refusal(result) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr[-3000:]
    assert lines[0].startswith("error: ")
    return lines[0]


def test_lines_come_back_in_input_order_whatever_they_are_batched_with(model_folder, tmp_path):
    """Batched by token length in windows smaller than the file (beam 4, the saved config), each line's output
    is the one it gets translated alone: in its place, bounded by its own length + 50 tokens (§6.1), not by
    its batch's longest."""
    lines = _lines(20)
    source = _write(tmp_path / "in.txt", lines)
    common = ["--model", model_folder, "--input", source, "--device", "cpu"]
    batching = ["--window", "8", "--batch_size", "4", "--max_tokens", "60"]
    _translate(tmp_path, *common, *batching, "--output", tmp_path / "batched.txt")
    _translate(tmp_path, *common, "--window", "1", "--output", tmp_path / "alone.txt")
    batched, alone = _output_lines(tmp_path / "batched.txt"), _output_lines(tmp_path / "alone.txt")
    assert batched == alone and len(batched) == len(lines)
    assert batched[3] == "" and len(set(batched)) > 8  # the blank line; outputs that tell lines apart
    # Word-level tokens: an output's words are its tokens. Short lines batched with 30-word ones stop at
    # their own bound; the longest stop at the decoder's positions.
    bounds = [min(len(line.split()) + 1 + EXTRA_OUTPUT_TOKENS, POSITIONS - 1) for line in lines]
    assert all(len(out.split()) <= bound for out, bound in zip(batched, bounds, strict=True))
    assert any(len(out.split()) == bound < POSITIONS - 1 for out, bound in zip(batched, bounds, strict=True))
    assert not (tmp_path / f"batched.txt{RECORD_SUFFIX}").exists()  # complete: no record left behind


class _EchoBackend:
    """Upper-cases each text; records the batches it was given."""

    def __init__(self):
        self.batches = []

    def lengths(self, texts):
        return [len(text.split()) for text in texts]

    def decode(self, texts):
        self.batches.append(list(texts))
        return [text.upper() for text in texts]


def test_no_more_than_a_window_of_lines_is_held():
    """A file of 200 lines through a window of 16: the input is read lazily, never more than 16 lines ahead of
    what was written; each window is written whole, in input order, its batches sorted by length."""
    lines = _lines(200, seed=1)
    read, written, held = [], [], []

    def reader():
        for line in lines:
            held.append(len(read) - len(written))
            read.append(line)
            yield line

    backend = _EchoBackend()
    count = translate_lines(reader(), backend, written.extend, window=16, batch_size=5)
    assert count == len(lines) and written == [line.upper() for line in lines]
    assert max(held) == 15  # the 16th line of a window is read while 15 are held
    assert len(read) == len(lines)
    for batch in backend.batches:
        sizes = [len(text.split()) for text in batch]
        assert len(batch) <= 5 and sizes == sorted(sizes, reverse=True)
    # Continued after line 21, windows still end at multiples of 16: the rest is cut as it was.
    cut = list(line_windows(iter(lines[21:]), 21, 16))
    assert [(start, len(chunk)) for start, chunk in cut[:3]] == [(21, 11), (32, 16), (48, 16)]


def test_an_interrupted_output_is_continued_to_what_an_uninterrupted_run_writes(
    model_folder, tmp_path, monkeypatch
):
    lines = _lines(40, seed=2)
    source = _write(tmp_path / "in.txt", lines)
    common = ["--model", model_folder, "--input", source, "--window", "8"]
    common += ["--num_beams", "1", "--device", "cpu"]
    _translate(tmp_path, *common, "--output", tmp_path / "whole.txt")
    expected = (tmp_path / "whole.txt").read_bytes()

    # Ctrl-C in the third window: two windows are written, and the record says what they translate.
    output, record = tmp_path / "out.txt", tmp_path / f"out.txt{RECORD_SUFFIX}"
    decode, calls = backends.TransformersBackend.decode, []

    def interrupted(self, texts):
        calls.append(len(texts))
        if sum(calls) > 16:
            raise KeyboardInterrupt
        return decode(self, texts)

    monkeypatch.setattr(backends.TransformersBackend, "decode", interrupted)
    result = _translate(tmp_path, *common, "--output", output, "--batch_size", "1", check=False)
    monkeypatch.undo()
    assert result.returncode == 130 and record.is_file()
    assert _output_lines(output) == _output_lines(tmp_path / "whole.txt")[:16]
    # ... and a kill in the middle of writing the next window leaves a line cut short.
    with open(output, "ab") as file:
        file.write(b"two tw")

    other = _translate(tmp_path, *common, "--output", output, "--num_beams", "2", check=False)
    assert "is an unfinished translation of another generation" in _refusal(other)
    result = _translate(tmp_path, *common, "--output", output)
    assert "continuing after line 16" in result.stderr
    assert output.read_bytes() == expected and not record.exists()

    # Complete, it is not translated again unasked; with --overwrite it is.
    again = _translate(tmp_path, *common, "--output", output, check=False)
    assert _refusal(again) == (
        f"error: {output} exists and is no unfinished translation (no out.txt{RECORD_SUFFIX} beside it): "
        "pass --overwrite to replace it, or give another --output."
    )
    _translate(tmp_path, *common, "--output", output, "--overwrite")
    assert output.read_bytes() == expected


def test_a_file_the_command_did_not_start_is_never_written(model_folder, tmp_path):
    source = _write(tmp_path / "in.txt", ["ein hund"])
    notes = _write(tmp_path / "notes.txt", ["my notes"])
    common = ["--model", model_folder, "--device", "cpu"]
    result = _translate(tmp_path, *common, "--input", source, "--output", notes, check=False)
    assert "notes.txt exists and is no unfinished translation" in _refusal(result)
    result = _translate(tmp_path, *common, "--input", source, "--output", source, "--overwrite", check=False)
    assert _refusal(result) == (
        f"error: --output {source} is the --input being read: writing there would replace it; give "
        "another --output."
    )
    assert notes.read_text() == "my notes\n" and source.read_text() == "ein hund\n"


@pytest.mark.parametrize(
    "options, message",
    [
        (["--input", "missing.txt"], "No --input file missing.txt"),
        (["--window", "0"], "--window must be at least 1, got 0"),
        (["--top_k", "5"], "--top_k applies to sampling: pass --do_sample true"),
        (["--backend", "ctranslate2"], "is no CTranslate2 export"),
        (["--device", "gpu7"], "--device 'gpu7' is not a device"),
        (["--backend", "ctranslate2", "--device", "gpu7"], "--device 'gpu7' is not a device CTranslate2"),
        (["--dtype", "float64"], "--dtype"),
        (
            ["--backend", "ctranslate2", "--dtype", "bfloat16"],
            "--dtype bfloat16 is for the transformers backend",
        ),
        (["--model", "."], "is a folder without config.json, so not a saved model folder"),
    ],
)
def test_bad_input_is_refused_in_one_line(model_folder, tmp_path, options, message):
    result = _translate(tmp_path, "--model", model_folder, *options, check=False)
    assert message in _refusal(result)


def test_a_model_decodes_in_the_dtype_asked(model_folder, tmp_path):
    """auto keeps the weights as saved (float32 here): the same lines as float32; bfloat16 decodes too."""
    from hf_vanilla_transformer.devices import decoding_model

    source = _write(tmp_path / "in.txt", _lines(8, seed=5))
    outputs = {}
    for dtype in ("auto", "float32", "bfloat16"):
        output = tmp_path / f"out-{dtype}.txt"
        _translate(tmp_path, "--model", model_folder, "--input", source, "--output", output, "--dtype", dtype,
                   "--num_beams", "1", "--max_new_tokens", "6", "--device", "cpu")  # fmt: skip
        outputs[dtype] = _output_lines(output)
    assert outputs["auto"] == outputs["float32"] and len(outputs["bfloat16"]) == 8
    model = VanillaTransformerForConditionalGeneration.from_pretrained(model_folder)
    assert decoding_model(model, torch.device("cpu"), torch.bfloat16).dtype == torch.bfloat16


def test_standard_input_to_standard_output(model_folder, tmp_path, monkeypatch):
    lines = _lines(10, seed=3)
    source = _write(tmp_path / "in.txt", lines)
    common = ["--model", model_folder, "--num_beams", "1", "--max_new_tokens", "6", "--device", "cpu"]
    _translate(tmp_path, *common, "--input", source, "--output", tmp_path / "out.txt")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(source.read_bytes()), encoding="utf-8"))
    result = _translate(tmp_path, *common)
    assert result.stdout == (tmp_path / "out.txt").read_text(encoding="utf-8")
    assert len(result.stdout.splitlines()) == len(lines)


@pytest.mark.parametrize("device", ["cpu", "cuda:1"])
def test_one_process_decodes_on_the_device_given(device):
    """Alone, the process is the one process on the device asked for, another GPU than the first included (a
    torch.device is only a name until something is put on it), and accelerate's process-wide state is left
    unmade: its first maker fixes its device for all that follows in the process, a training run too."""
    from accelerate import PartialState

    PartialState._reset_state()
    state, chosen = translating._processes(torch.device(device))
    assert (state.num_processes, state.is_main_process) == (1, True) and chosen == torch.device(device)
    backend = SimpleNamespace(lengths=lambda texts: [len(text) for text in texts], decode=lambda texts: texts)
    assert windows.translate_lines(["a", "", "b c"], backend, lambda outputs: None, 2, 2, state=state) == 3
    assert not PartialState._shared_state


def test_two_processes_write_what_one_writes(model_folder, tmp_path):
    """Under `accelerate launch` on two CPU processes (gloo), each decoding every other batch of each window,
    the main process writes the output one process writes, byte for byte."""
    source = _write(tmp_path / "in.txt", _lines(30, seed=4))
    common = ["--model", model_folder, "--input", source, "--window", "12"]
    common += ["--batch_size", "3", "--device", "cpu"]
    _translate(tmp_path, *common, "--output", tmp_path / "one.txt")
    accelerate_launch("multi_gpu", "scripts/translate.py", *common, "--output", tmp_path / "two.txt")
    assert (tmp_path / "two.txt").read_bytes() == (tmp_path / "one.txt").read_bytes()
    assert not (tmp_path / f"two.txt{RECORD_SUFFIX}").exists()


def test_each_process_samples_its_share_as_one_process_would(model_folder, monkeypatch):
    """Sampling, seeded by each batch's place in the input: the two halves of the batches, decoded by two
    processes, are what one process decodes, whichever process draws them."""
    from hf_vanilla_transformer.saving import load_model_folder

    model, tokenizer = load_model_folder(model_folder)
    generation = {"num_beams": 1, "max_new_tokens": None, "do_sample": True, "top_k": 5}
    backend = backends.TransformersBackend(model, tokenizer, generation)
    lines = _lines(12, seed=7)
    translate = functools.partial(windows.translate_window, lines, backend, 2, seed=11, first_line=24)
    one = translate()
    shares = []
    # Each of two processes, run alone: what it would hand to the other is kept (`windows` imports
    # accelerate's collectives when it first calls one).
    import accelerate.utils

    monkeypatch.setattr(accelerate.utils, "gather_object", lambda items: shares.append(dict(items)) or items)
    for rank in (0, 1):
        translate(state=SimpleNamespace(process_index=rank, num_processes=2))
    assert shares[0] and shares[1] and not set(shares[0]) & set(shares[1])
    keep = [index for index, line in enumerate(lines) if line]
    two = [""] * len(lines)
    for index, output in {**shares[0], **shares[1]}.items():
        two[keep[index]] = output
    assert two == one
    assert one != translate(seed=12)  # the seed matters: the comparison above is not between greedy outputs


def test_ctranslate2_backend_translates_as_its_export_and_as_generate(model_folder, tmp_path):
    """On the CTranslate2 export of the model, each line as `CTranslate2Seq2Seq.generate` translates it alone,
    and (greedy, float32) as the transformers backend does: token for token."""
    pytest.importorskip("ctranslate2")
    from hf_vanilla_transformer.interop.ctranslate2_export import convert_to_ctranslate2
    from hf_vanilla_transformer.interop.ctranslate2_inference import CTranslate2Seq2Seq

    exported = convert_to_ctranslate2(model_folder, tmp_path / "ct2")
    c_txt, t_txt = tmp_path / "c.txt", tmp_path / "t.txt"
    lines = _lines(16, seed=5)
    source = _write(tmp_path / "in.txt", lines)
    common = ["--input", source, "--window", "6", "--batch_size", "4", "--num_beams", "1"]
    common += ["--max_new_tokens", "30"]
    _translate(tmp_path, "--model", exported, "--backend", "ctranslate2", *common, "--output", c_txt)
    _translate(tmp_path, "--model", model_folder, "--device", "cpu", *common, "--output", t_txt)
    ct2 = CTranslate2Seq2Seq(exported, intra_threads=1)
    alone = [
        ct2.generate([line], split_sentences=False, beam_size=1, max_decoding_length=30)[0] if line else ""
        for line in lines
    ]
    assert _output_lines(c_txt) == alone == _output_lines(t_txt)
    assert sum(bool(text) for text in alone) >= 8  # the tiny model writes <unk>s, which decode to nothing
    # No </s> before --min_new_tokens, on both backends alike: what lets a benchmark time equal outputs.
    common += ["--min_new_tokens", "30"]
    _translate(
        tmp_path, "--model", exported, "--backend", "ctranslate2", *common, "--output", c_txt, "--overwrite"
    )
    _translate(
        tmp_path, "--model", model_folder, "--device", "cpu", *common, "--output", t_txt, "--overwrite"
    )
    assert _output_lines(c_txt) == _output_lines(t_txt)
    ids = [ct2.tokenizer.encode(line).ids for line in lines if line]
    generated = ct2.generate_ids(ids, beam_size=1, min_decoding_length=30, max_decoding_length=30)
    lengths = {len(out) for out in generated}
    assert lengths == {30}


def test_a_source_is_cut_at_the_length_the_model_was_trained_with(
    model_folder, trained_limit_folder, tmp_path
):
    """A model whose config records the source length it was trained with (`max_source_length`, far below its
    positions) decodes a longer line as that line cut to that many tokens (its </s> kept): as the same weights
    saved without the record decode the cut line. One warning names the limit and how many it cut."""
    long, short = _words(30, seed=1), _words(3, seed=2)
    cut = " ".join(long.split()[: TRAINED_SOURCE - 1])  # word-level tokens: the cut's words and its </s>
    common = ["--num_beams", "1", "--device", "cpu"]
    limited = _translate(
        tmp_path, "--model", trained_limit_folder, *common, "--input", _write(tmp_path / "a", [long, short])
    )
    unrecorded = _translate(
        tmp_path, "--model", model_folder, *common, "--input", _write(tmp_path / "b", [cut, short, long])
    )
    assert limited.stdout.split("\n")[:-1] == unrecorded.stdout.split("\n")[:2]
    assert (
        unrecorded.stdout.split("\n")[2] != unrecorded.stdout.split("\n")[0]
    )  # uncut, the long line differs
    assert (
        f"1 input(s) longer than {TRAINED_SOURCE} tokens, the longest source the model was trained with (its "
        "max_source_length), are cut to that many tokens." in limited.stderr
    )
    assert "are cut" not in unrecorded.stderr  # 31 tokens: within the 64 positions of a folder without it


def test_a_folder_that_records_no_source_length_is_cut_at_its_positions(model_folder, tmp_path):
    """A folder saved without the source length it was trained with (before it was recorded, or a converted
    one) decodes as before: a line longer than its positions is cut to them."""
    long = _words(POSITIONS + 6, seed=3)
    cut = " ".join(long.split()[: POSITIONS - 1])
    common = ["--model", model_folder, "--num_beams", "1", "--max_new_tokens", "10", "--device", "cpu"]
    result = _translate(tmp_path, *common, "--input", _write(tmp_path / "long", [long]))
    expected = _translate(tmp_path, *common, "--input", _write(tmp_path / "cut", [cut]))
    assert result.stdout == expected.stdout
    assert (
        f"1 input(s) longer than {POSITIONS} tokens, the model's positions (its max_position_embeddings), "
        "are cut to that many tokens." in result.stderr
    )


def test_the_ctranslate2_backend_loads_neither_torch_nor_transformers(model_folder, tmp_path):
    """translate.py --backend ctranslate2, whole in a fresh process, decodes an export without torch or
    transformers (they take seconds to load, and torch slows CTranslate2's decoding): the export records what
    its task says of decoding. An export made before it did decodes the same, its task found by the
    registry."""
    pytest.importorskip("ctranslate2")
    from hf_vanilla_transformer.interop.ctranslate2_export import convert_to_ctranslate2
    from hf_vanilla_transformer.interop.ctranslate2_inference import GENERATION_DEFAULTS_FILE, TASK_TRAITS
    from hf_vanilla_transformer.tasks.registry import find_task

    exported = convert_to_ctranslate2(model_folder, tmp_path / "ct2")
    defaults = json.loads((exported / GENERATION_DEFAULTS_FILE).read_text(encoding="utf-8"))
    task = find_task("translation")
    assert defaults[TASK_TRAITS] == {
        "name": task.name,
        "output_length_from_config": task.output_length_from_config,
        "splits_into_sentences": task.splits_into_sentences,
    }
    earlier = shutil.copytree(exported, tmp_path / "ct2-earlier")
    del defaults[TASK_TRAITS]
    (earlier / GENERATION_DEFAULTS_FILE).write_text(json.dumps(defaults), encoding="utf-8")

    source = _write(tmp_path / "in.txt", _lines(12, seed=6))
    # transformers' argument parser module alone is no import of transformers (`cli.argument_parser_class`).
    code = (
        "import sys; sys.path.insert(0, sys.argv.pop(1)); import translate; translate.main(); "
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] == 'torch' or m == 'transformers'); "
        "assert not heavy, heavy"
    )
    common = ["--backend", "ctranslate2", "--input", source, "--split_sentences", "true"]
    result = run_code(
        code,
        SCRIPTS,
        *common,
        "--model",
        exported,
        "--output",
        tmp_path / "out.txt",
        cwd=tmp_path,
        env=ONE_THREAD,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    _translate(tmp_path, *common, "--model", earlier, "--output", tmp_path / "earlier.txt")
    assert _output_lines(tmp_path / "out.txt") == _output_lines(tmp_path / "earlier.txt")
    assert len(_output_lines(tmp_path / "out.txt")) == 12


@pytest.mark.parametrize("options, status", [(["--help"], 0), (["--mistyped_option", "1"], 2)])
def test_help_and_a_mistyped_option_are_answered_without_torch(tmp_path, options, status):
    """What every user sees first is answered before torch could load: the modules translate.py imports at its
    top are torch-free."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", str(SCRIPTS / "translate.py"), *options],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == status, result.stderr[-3000:]
    imported = {
        line.rsplit("|", 1)[1].strip()
        for line in result.stderr.splitlines()
        if line.startswith("import time:")
    }
    assert "hf_vanilla_transformer.decoding.arguments" in imported
    assert not {name for name in imported if name.split(".")[0] == "torch"}


def test_ctranslate2_cuts_a_source_where_generate_cuts_it(trained_limit_folder, tmp_path):
    """The export carries the source length the model was trained with, and the CTranslate2 backend cuts a
    source there, as the transformers backend does: the same outputs, the same warning."""
    pytest.importorskip("ctranslate2")
    import json

    from hf_vanilla_transformer.interop.ctranslate2_export import convert_to_ctranslate2
    from hf_vanilla_transformer.interop.ctranslate2_inference import (
        GENERATION_DEFAULTS_FILE,
        CTranslate2Seq2Seq,
    )

    exported = convert_to_ctranslate2(trained_limit_folder, tmp_path / "ct2")
    defaults = json.loads((exported / GENERATION_DEFAULTS_FILE).read_text())
    assert (defaults["max_source_length"], defaults["max_position_embeddings"]) == (TRAINED_SOURCE, POSITIONS)
    long, short = _words(30, seed=1), _words(3, seed=2)
    source = _write(tmp_path / "in.txt", [long, short])
    common = ["--input", source, "--num_beams", "1", "--max_new_tokens", "20"]
    ct2 = _translate(tmp_path, "--model", exported, "--backend", "ctranslate2", *common)
    generate = _translate(tmp_path, "--model", trained_limit_folder, "--device", "cpu", *common)
    assert ct2.stdout == generate.stdout
    cut = " ".join(long.split()[: TRAINED_SOURCE - 1])
    alone = CTranslate2Seq2Seq(exported, intra_threads=1).generate(
        [cut, short], split_sentences=False, beam_size=1, max_decoding_length=20
    )
    assert ct2.stdout.split("\n")[:-1] == alone
    warning = f"1 input(s) longer than {TRAINED_SOURCE} tokens, the longest source the model was trained with"
    assert warning in ct2.stderr and warning in generate.stderr


def test_split_sentences_translates_each_line_as_a_text(model_folder, tmp_path):
    """Each line split into its sentences (the model's recorded source language's rules), each translated as
    it is alone, joined again into one output line."""
    first, second, third = "Ein hund läuft im park.", "Zwei katzen schlafen.", "A dog runs in the park."
    texts = [f"{first} {second}", "", f"{third} {first} {second}", second]
    common = ["--model", model_folder, "--num_beams", "1", "--device", "cpu"]
    _write(tmp_path / "sentences.txt", [first, second, third])
    _translate(tmp_path, *common, "--input", tmp_path / "sentences.txt", "--output", tmp_path / "s.txt")
    one, two, three = _output_lines(tmp_path / "s.txt")
    assert one and two and three
    source = _write(tmp_path / "texts.txt", texts)
    split = _translate(tmp_path, *common, "--input", source, "--split_sentences", "true").stdout
    assert split.split("\n")[:-1] == [f"{one} {two}", "", f"{three} {one} {two}", two]
    whole = _translate(tmp_path, *common, "--input", source).stdout
    assert whole.split("\n")[0] != f"{one} {two}"  # handed whole, a text translates otherwise


def test_a_marian_folder_translates_as_its_generate_does(tmp_path):
    """Any `AutoModelForSeq2SeqLM` folder, here a tiny `MarianMTModel` (whose saved generation config names a
    beam but no length penalty): each line as the model's own generate() translates it alone."""
    from transformers import MarianConfig, MarianMTModel

    tokenizer = make_word_tokenizer()
    torch.manual_seed(0)
    config = MarianConfig(
        vocab_size=len(tokenizer), d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=POSITIONS,
        pad_token_id=0, eos_token_id=2, decoder_start_token_id=0, forced_eos_token_id=2,
    )  # fmt: skip
    model = MarianMTModel(config).eval()
    model.generation_config.num_beams = 3
    model.save_pretrained(tmp_path / "marian")
    tokenizer.save_pretrained(tmp_path / "marian")
    lines = _lines(8, seed=6)
    source = _write(tmp_path / "in.txt", lines)
    result = _translate(tmp_path, "--model", tmp_path / "marian", "--input", source, "--batch_size", "3")
    expected = []
    for line in lines:
        batch = tokenizer([line], return_tensors="pt")
        with torch.inference_mode():
            ids = model.generate(**batch, max_new_tokens=batch["input_ids"].shape[1] + EXTRA_OUTPUT_TOKENS)
        expected.append(tokenizer.decode(ids[0], skip_special_tokens=True).strip() if line else "")
    assert result.stdout.split("\n")[:-1] == expected
    assert sum(bool(text) for text in expected) >= 6


def test_a_compressed_input_is_translated_as_the_text_it_holds(model_folder, tmp_path):
    """A gzip input, named .gz or not (told by its first bytes), is its text: as many output lines as it holds
    lines, each the translation of the plain file's line."""
    lines = _lines(6, seed=8)
    plain = _write(tmp_path / "news.de", lines)
    (tmp_path / "news.de.gz").write_bytes(gzip.compress(plain.read_bytes(), mtime=0))
    (tmp_path / "unnamed").write_bytes(gzip.compress(plain.read_bytes(), mtime=0))
    common = ["--model", model_folder, "--num_beams", "1", "--max_new_tokens", "8", "--device", "cpu"]
    expected = _translate(tmp_path, *common, "--input", plain).stdout
    assert len(expected.split("\n")[:-1]) == len(lines)
    for name in ("news.de.gz", "unnamed"):
        result = _translate(
            tmp_path, *common, "--input", tmp_path / name, "--output", tmp_path / f"{name}.en"
        )
        assert (tmp_path / f"{name}.en").read_text(encoding="utf-8") == expected
        assert "UTF-8" not in result.stderr


def test_a_pipe_is_translated_in_one_pass_a_line_for_a_line(model_folder, tmp_path, monkeypatch):
    """`--input <(zcat news.gz)`: a FIFO is read once, as it comes, not counted ahead (and the progress bar
    says so); its output is the file's, a line for a line. Cut short, it cannot be continued, and that is said
    in one line."""
    lines = _lines(20, seed=9)
    lines[5] = "\ufeffein\u2028hund"  # a mark, a line separator: still one line, translated as "ein hund"
    plain = _write(tmp_path / "news.de", [*lines[:5], "ein hund", *lines[6:]])
    common = ["--model", model_folder, "--num_beams", "1", "--max_new_tokens", "6", "--device", "cpu"]
    common += ["--window", "8"]
    expected = _translate(tmp_path, *common, "--input", plain).stdout
    assert len(expected.split("\n")[:-1]) == len(lines)
    data = gzip.compress("".join(f"{line}\n" for line in lines).encode("utf-8"), mtime=0)
    output = tmp_path / "news.en"
    with fed_fifo(tmp_path / "pipe", data) as fifo:
        result = _translate(tmp_path, *common, "--input", fifo, "--output", output, "--progress", "true")
    assert output.read_text(encoding="utf-8") == expected
    assert "Translating a stream, not counted ahead: 20 lines" in result.stderr

    # Interrupted in its second window, the output keeps the first: a rerun cannot read the pipe from there.
    decode, calls = backends.TransformersBackend.decode, []

    def interrupted(self, texts):
        calls.append(len(texts))
        if sum(calls) > 8:
            raise KeyboardInterrupt
        return decode(self, texts)

    monkeypatch.setattr(backends.TransformersBackend, "decode", interrupted)
    with fed_fifo(tmp_path / "pipe", data) as fifo:
        stopped = _translate(
            tmp_path, *common, "--input", fifo, "--output", output, "--overwrite", check=False
        )
    monkeypatch.undo()
    assert stopped.returncode == 130 and _output_lines(output) == expected.split("\n")[:8]
    with fed_fifo(tmp_path / "pipe", data) as fifo:
        again = _translate(tmp_path, *common, "--input", fifo, "--output", output, check=False)
    assert _refusal(again) == (
        f"error: {output} is an unfinished translation of {fifo}, a stream, which cannot be checked to be "
        "the same input nor read again from where it stopped: pass --overwrite to start again (give the "
        "input as a regular --input FILE to be resumable)."
    )


def _run_translate(model_folder, cwd, shell_tail: str = "", **run) -> subprocess.CompletedProcess:
    """scripts/translate.py in a process of its own, its standard output where `run` or `shell_tail` sends
    it; a window of one line, so that it writes (and flushes) every line apart."""
    command = [sys.executable, str(SCRIPTS / "translate.py"), "--model", str(model_folder)]
    command += ["--input", "in.de", "--num_beams", "1", "--max_new_tokens", "2", "--device", "cpu"]
    command += ["--window", "1"]
    if shell_tail:
        run["args"] = ["bash", "-c", f'"$@" {shell_tail}; exit ${{PIPESTATUS[0]}}', "bash", *command]
    else:
        run["args"] = command
    return subprocess.run(**run, cwd=cwd, stderr=subprocess.PIPE, text=True, timeout=300)


def test_a_full_standard_output_ends_in_one_line_and_a_closed_one_quietly(model_folder, tmp_path):
    """`translate.py > /dev/full` (a full disk): one line naming standard output and status 2, not a traceback
    and not success. `translate.py | head -1`: no line at all, and a shell's status for SIGPIPE."""
    _write(tmp_path / "in.de", _lines(300, seed=4))
    with open("/dev/full", "w") as full:
        result = _run_translate(model_folder, tmp_path, stdout=full)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert [line for line in result.stderr.splitlines() if line.startswith("error:")] == [
        "error: standard output could not be written: no space left on device. Free space where it goes, or "
        "send it elsewhere."
    ]
    assert result.stderr.strip().splitlines()[-1].startswith("error:")
    closed = _run_translate(model_folder, tmp_path, "| head -1", stdout=subprocess.PIPE)
    assert closed.returncode == 141 and len(closed.stdout.splitlines()) == 1
    assert "Traceback" not in closed.stderr and "Error" not in closed.stderr, closed.stderr[-3000:]


@pytest.mark.parametrize(
    "data, message",
    [
        (
            "Zwei Männer.\n".encode("latin-1"),
            "in.de' is not valid UTF-8: line 1 has byte 0xe4 at byte offset 6",
        ),
        (gzip.compress(b"ein hund\n" * 5000, mtime=0)[:60], "in.de' is gzip data cut short or damaged after"),
    ],
    ids=["latin-1", "gzip cut short"],
)
def test_an_input_that_does_not_read_is_refused_before_anything_is_written(
    model_folder, tmp_path, data, message
):
    source = tmp_path / "in.de"
    source.write_bytes(data)
    output = tmp_path / "out.en"
    result = _translate(tmp_path, "--model", model_folder, "--input", source, "--output", output, check=False)
    assert message in _refusal(result) and str(source) in _refusal(result)
    assert not output.exists() and not (tmp_path / f"out.en{RECORD_SUFFIX}").exists()


@pytest.mark.parametrize("option", ["--max_new_tokens", "--min_new_tokens"])
def test_a_length_past_the_models_positions_is_refused_in_one_line(model_folder, tmp_path, option):
    source = _write(tmp_path / "in.txt", ["ein hund"])
    result = _translate(tmp_path, "--model", model_folder, "--input", source, option, "100", check=False)
    assert _refusal(result) == (
        f"error: {option} 100 is more than {POSITIONS}, the positions of {model_folder} (its "
        f"max_position_embeddings): give {option} {POSITIONS} or less."
    )
    # At the limit, generate() runs: the limit refused is the model's own.
    at_limit = _translate(tmp_path, "--model", model_folder, "--input", source, option, str(POSITIONS))
    assert len(at_limit.stdout.splitlines()) == 1


def test_evaluation_refuses_a_length_past_the_positions_before_reading_data(model_folder, tmp_path):
    result = run_script_file(
        "evaluate_model.py", "--model", model_folder, "--dataset", tmp_path / "none",
        "--max_new_tokens", "65", cwd=tmp_path,
    )  # fmt: skip
    assert _refusal(result) == (
        f"error: --max_new_tokens 65 is more than {POSITIONS}, the positions of {model_folder} (its "
        f"max_position_embeddings): give --max_new_tokens {POSITIONS} or less."
    )


def test_an_output_under_a_file_is_refused_in_one_line(model_folder, tmp_path):
    source = _write(tmp_path / "in.txt", ["ein hund"])
    notes = _write(tmp_path / "notes.txt", ["my notes"])
    result = _translate(
        tmp_path, "--model", model_folder, "--input", source, "--output", notes / "out.txt", check=False
    )
    line = _refusal(result)  # as the options are parsed (`outputs.check_writable`), or as translate() starts
    assert line.startswith(f"error: --output {notes / 'out.txt'} ") and f"{notes}, which is a file" in line
    # The library's own check, for a caller that never parsed options.
    arguments = TranslateArguments(
        model=str(model_folder), input=[str(source)], output=str(notes / "out.txt"), device="cpu"
    )
    with pytest.raises(UsageError, match=rf"lies under {notes}, which is a file"):
        translating.translate(arguments)
    (tmp_path / "folder").mkdir()
    result = _translate(
        tmp_path, "--model", model_folder, "--input", source, "--output", tmp_path / "folder", check=False
    )
    assert _refusal(result) == f"error: --output {tmp_path / 'folder'} is a folder: give a file to write to."
    report = notes / "deeper" / "report.json"
    result = run_script_file(
        "evaluate_model.py", "--model", model_folder, "--dataset", tmp_path / "none", "--output_file", report,
        cwd=tmp_path,
    )  # fmt: skip
    assert f"{notes}, which is a file" in _refusal(result)
    assert notes.read_text() == "my notes\n"


@pytest.mark.parametrize("name", ["model.bin", "tokenizer.json", "generation_defaults.json"])
def test_a_ctranslate2_export_cut_short_is_named_in_one_line(model_folder, tmp_path, name):
    pytest.importorskip("ctranslate2")
    from hf_vanilla_transformer.interop.ctranslate2_export import convert_to_ctranslate2

    exported = convert_to_ctranslate2(model_folder, tmp_path / "ct2")
    data = (exported / name).read_bytes()
    (exported / name).write_bytes(data[: len(data) // 2])
    source = _write(tmp_path / "in.txt", ["ein hund"])
    result = _translate(
        tmp_path, "--model", exported, "--backend", "ctranslate2", "--input", source, check=False
    )
    line = _refusal(result)
    assert line.startswith(f"error: {exported / name} is truncated or corrupt"), line
    assert "Export" in line and "export_ctranslate2.py" in line
