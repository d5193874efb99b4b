"""The decoding options, one dataclass (`decoding.settings.DecodingArguments`) that every decoding command
takes: each option in the same words on every command line, each reaching generate() and CTranslate2 by its
field (or refused by CTranslate2 with its field's reason), and the module that declares them free of torch, so
that a command can answer and refuse its options before it loads it."""

import dataclasses
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch

from hf_vanilla_transformer import VanillaTransformerForConditionalGeneration
from hf_vanilla_transformer.decoding import backends, generation
from hf_vanilla_transformer.decoding.settings import (
    CTRANSLATE2,
    CTRANSLATE2_REFUSAL,
    CTRANSLATE2_VALUE,
    GENERATE,
    DecodingArguments,
    decoding_fields,
)
from hf_vanilla_transformer.errors import UsageError
from hf_vanilla_transformer.saving import save_model_folder
from hf_vanilla_transformer.tasks import get_task

from .conftest import tiny_config
from .script_runner import run_script_file
from .test_script_help import built_parser

ROOT = Path(__file__).resolve().parents[1]
# The commands that decode, each taking every decoding option (the demo page builds them from its controls).
DECODING_COMMANDS = ("translate", "evaluate_model")
SAMPLING = ["--do_sample", "true", "--num_beams", "1"]
# A value of each decoding option, and what it needs beside it (given in the run without it too): a new option
# is tested here the day it is added.
EXAMPLES = {
    "num_beams": (["--num_beams", "2"], []),
    "length_penalty": (["--length_penalty", "1.3"], []),  # the export's saved beams are 4
    "max_new_tokens": (["--max_new_tokens", "7"], []),
    "min_new_tokens": (["--min_new_tokens", "2"], []),
    "do_sample": (["--do_sample", "true"], ["--num_beams", "1"]),
    "top_k": (["--top_k", "5"], SAMPLING),
    "top_p": (["--top_p", "0.9"], SAMPLING),
    "temperature": (["--temperature", "0.7"], SAMPLING),
    "no_repeat_ngram_size": (["--no_repeat_ngram_size", "2"], []),
    "repetition_penalty": (["--repetition_penalty", "1.2"], []),
    "seed": (["--seed", "3"], SAMPLING),
}
NAMES = [option.name for option in decoding_fields()]


def test_the_settings_module_imports_neither_torch_nor_transformers():
    """Imported in a fresh interpreter, with the package's face (which registers the model with transformers)
    left out: the module and what it imports load no torch and no transformers, nor do translate.py's options
    (with the CTranslate2 backend, built too) and the file translator's modules."""
    code = """
import importlib.util, sys, types
spec = importlib.util.find_spec("hf_vanilla_transformer")  # found, not imported
package = types.ModuleType("hf_vanilla_transformer")
package.__path__ = list(spec.submodule_search_locations)
sys.modules["hf_vanilla_transformer"] = package
from hf_vanilla_transformer.decoding.settings import DecodingArguments
assert DecodingArguments(num_beams=2).num_beams == 2
from hf_vanilla_transformer.decoding.arguments import TranslateArguments
assert TranslateArguments(model="m", backend="ctranslate2", device="cuda:1").device == "cuda:1"
import hf_vanilla_transformer.decoding.translating
loaded = sorted({"torch", "transformers", "accelerate"} & set(sys.modules))
assert not loaded, loaded
"""
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr[-3000:]


def test_every_option_is_declared_whole():
    """Each option has a help text, its generate() keyword, and its CTranslate2 keyword or the reason
    CTranslate2 refuses it; a help text that speaks of a default says where it comes from, never a number
    that could go stale."""
    for option in decoding_fields():
        assert option.metadata.get("help"), option.name
        assert GENERATE in option.metadata, f"{option.name}: no generate() keyword (None for none)"
        assert (CTRANSLATE2 in option.metadata) != (CTRANSLATE2_REFUSAL in option.metadata), option.name
        if option.metadata[GENERATE] is None:  # no decoding call takes it: the command applies it itself
            assert option.metadata.get(CTRANSLATE2) is None, option.name
        default = re.search(r"Default: (.*)", option.metadata["help"])
        if default is not None:  # the paper's + 50 is no default of a model's that could change
            said = default.group(1)
            assert "saved generation config" in said or "§6.1" in said, option.name
            assert not re.search(r"\d", said.replace("+ 50 (§6.1)", "")), option.name
    assert set(EXAMPLES) == set(NAMES), f"give each option an example here: {set(NAMES) ^ set(EXAMPLES)}"


@pytest.mark.parametrize("name", NAMES)
def test_every_decoding_command_takes_the_option_in_the_same_words(name, monkeypatch):
    option = next(option for option in decoding_fields() if option.name == name)
    actions = {}
    for script in DECODING_COMMANDS:
        parser = built_parser(script, monkeypatch)
        matching = [action for action in parser._actions if f"--{name}" in action.option_strings]
        assert len(matching) == 1, f"{script}.py has no --{name}"
        actions[script] = matching[0]
    helps = {action.help for action in actions.values()}
    defaults = {action.default for action in actions.values()}
    assert len(helps) == 1 and len(defaults) == 1, f"--{name} is told otherwise by {sorted(actions)}"
    assert helps.pop().startswith(option.metadata["help"])


@pytest.fixture(scope="module")
def export(translation_data, tmp_path_factory):
    """A CTranslate2 export of a tiny model of the fixture corpus's tokenizer (a vocabulary larger than the
    top 50 tokens sampling draws from), and a file of lines to translate."""
    pytest.importorskip("ctranslate2")
    from transformers import AutoTokenizer

    from hf_vanilla_transformer.interop.ctranslate2_export import convert_to_ctranslate2

    folder = tmp_path_factory.mktemp("settings")
    tokenizer = AutoTokenizer.from_pretrained(translation_data / "tokenizer")
    torch.manual_seed(0)
    config = tiny_config(vocab_size=len(tokenizer), max_position_embeddings=64, task="translation")
    save_model_folder(VanillaTransformerForConditionalGeneration(config).eval(), tokenizer, folder / "model")
    lines = "Zwei Hunde spielen im Schnee.\nEin Mann liest eine Zeitung.\nEine Frau singt.\n"
    (folder / "in.txt").write_text(lines, encoding="utf-8")
    return convert_to_ctranslate2(folder / "model", folder / "ct2"), folder / "in.txt"


def _what_ctranslate2_is_given(export, arguments, monkeypatch) -> tuple[dict, list]:
    """`translate.py --backend ctranslate2` with `arguments`: the keywords of its first `translate_batch`
    and the seeds it set."""
    import ctranslate2

    translator_class, calls, seeds = ctranslate2.Translator, [], []

    class Recording:
        def __init__(self, *args, **kwargs):
            self.translator = translator_class(*args, **kwargs)

        def translate_batch(self, tokens, **options):
            calls.append(options)
            return self.translator.translate_batch(tokens, **options)

    monkeypatch.setattr(ctranslate2, "Translator", Recording)
    monkeypatch.setattr(ctranslate2, "set_random_seed", seeds.append)
    folder, source = export
    result = run_script_file(
        "translate.py", "--model", folder, "--backend", "ctranslate2", "--input", source, *arguments,
        cwd=source.parent,
    )  # fmt: skip
    monkeypatch.undo()
    assert result.returncode == 0, result.stderr[-3000:]
    return calls[0], seeds


@pytest.mark.parametrize("name", NAMES)
def test_every_option_reaches_ctranslate2_or_is_refused_with_its_reason(name, export, monkeypatch):
    """translate.py --backend ctranslate2 with each decoding option: it changes what CTranslate2 is given,
    under the keyword its field names (the seed: the seeds CTranslate2 is given), or it is refused in one line
    with its field's reason."""
    option = next(option for option in decoding_fields() if option.name == name)
    given, beside = EXAMPLES[name]
    reason = option.metadata.get(CTRANSLATE2_REFUSAL)
    if reason is not None:
        folder, source = export
        result = run_script_file(
            "translate.py", "--model", folder, "--backend", "ctranslate2", "--input", source, *beside, *given,
            cwd=source.parent,
        )  # fmt: skip
        assert result.returncode == 2 and reason in result.stderr, result.stderr[-3000:]
        return
    without, seeds_without = _what_ctranslate2_is_given(export, beside, monkeypatch)
    with_it, seeds_with = _what_ctranslate2_is_given(export, [*beside, *given], monkeypatch)
    keyword = option.metadata[CTRANSLATE2]
    if keyword is None:
        assert seeds_with and seeds_with != seeds_without
        return
    assert with_it[keyword] != without.get(keyword)
    if CTRANSLATE2_VALUE not in option.metadata:  # CTranslate2 takes the value as it is given
        assert with_it[keyword] == type(with_it[keyword])(given[1])


def test_an_option_ctranslate2_cannot_take_is_refused_with_its_fields_reason(monkeypatch):
    """The refusal of an option CTranslate2 has no keyword for comes from its field alone."""

    @dataclass(kw_only=True)
    class WithAnother(DecodingArguments):
        typical_p: float | None = field(
            default=None,
            metadata={
                "help": "With do_sample: typical sampling.",
                "range": "(0, 1]",
                GENERATE: "typical_p",
                CTRANSLATE2_REFUSAL: "CTranslate2 has no typical sampling.",
            },
        )

    monkeypatch.setattr(backends, "decoding_fields", lambda: dataclasses.fields(WithAnother))
    settings = {"num_beams": 1, "max_new_tokens": None, "do_sample": True}
    assert backends.ctranslate2_options(settings) == {"beam_size": 1, "sampling_topk": 50}
    with pytest.raises(UsageError) as refused:
        backends.ctranslate2_options({**settings, "typical_p": 0.9})
    assert str(refused.value) == (
        "--typical_p is not for --backend ctranslate2: CTranslate2 has no typical sampling. Drop it, or "
        "decode with --backend transformers."
    )


def test_a_new_option_reaches_generate_by_its_field_alone(tiny_model, monkeypatch):
    """generate()'s settings are the fields' (`generation_settings`): an option set is passed under its
    keyword, an option unset is left to the saved generation config."""

    @dataclass(kw_only=True)
    class WithAnother(DecodingArguments):
        epsilon_cutoff: float | None = field(
            default=None,
            metadata={"help": "With do_sample: ...", "range": "[0, 1)", GENERATE: "epsilon_cutoff"},
        )

    monkeypatch.setattr(generation, "decoding_fields", lambda: dataclasses.fields(WithAnother))
    config, task = tiny_model.generation_config, get_task("translation")
    unset = generation.generation_settings(WithAnother(num_beams=1), task, config)
    assert unset == {"num_beams": 1, "max_new_tokens": None, "do_sample": False}
    given = WithAnother(num_beams=1, do_sample=True, top_k=4, epsilon_cutoff=0.001)
    assert generation.generation_settings(given, task, config) == {
        **unset,
        "do_sample": True,
        "top_k": 4,
        "epsilon_cutoff": 0.001,
    }


@pytest.mark.parametrize("name", ["top_k", "top_p", "temperature"])
def test_a_sampling_option_without_sampling_is_refused_by_its_field(name):
    with pytest.raises(UsageError, match=rf"--{name} applies to sampling: pass --do_sample true with it"):
        DecodingArguments(**{name: 1})
    assert getattr(DecodingArguments(do_sample=True, **{name: 1}), name) == 1
