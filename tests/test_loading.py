"""Loading the way users do: save/load, Auto classes, trust_remote_code in a fresh process, the pipeline,
every generate() strategy, and the Trainer."""

import collections
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForSeq2SeqLM,
    DataCollatorForSeq2Seq,
    Seq2SeqTrainer,
    Seq2SeqTrainingArguments,
    TextIteratorStreamer,
    pipeline,
)

from hf_vanilla_transformer import (
    PIPELINE_TASK,
    VanillaTransformerConfig,
    VanillaTransformerForConditionalGeneration,
    VanillaTransformerModel,
)
from hf_vanilla_transformer.errors import CorruptFileError
from hf_vanilla_transformer.saving import load_model_folder, save_model_folder

from .conftest import tiny_config
from .script_runner import run_script_file

DECODER_INPUT = [[1, 5, 6, 7]]
SAVED_BEFORE_REFACTOR = Path(__file__).parent / "fixtures" / "saved_model_before_refactor"


def test_save_load_round_trip_keeps_tying_and_logits(tmp_path, tiny_model, padded_batch):
    tiny_model.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").exists() and not list(tmp_path.glob("*.bin"))
    with safe_open(tmp_path / "model.safetensors", "pt") as f:
        keys = set(f.keys())
    # The shared matrix is stored once; the sinusoidal tables are not weights at all.
    assert sum("embed_tokens" in k or "shared" in k or "lm_head" in k for k in keys) == 1
    assert not any("embed_positions" in k for k in keys)

    loaded, info = VanillaTransformerForConditionalGeneration.from_pretrained(
        tmp_path, output_loading_info=True
    )
    assert info["missing_keys"] == set() or not info["missing_keys"]
    assert not info["unexpected_keys"]
    assert loaded.lm_head.weight is loaded.model.shared.weight
    assert loaded.model.encoder.embed_tokens.weight is loaded.model.shared.weight
    assert loaded.model.decoder.embed_tokens.weight is loaded.model.shared.weight
    decoder_input_ids = torch.tensor(DECODER_INPUT * 3)
    with torch.no_grad():
        expected = tiny_model(**padded_batch, decoder_input_ids=decoder_input_ids).logits
        actual = loaded.eval()(**padded_batch, decoder_input_ids=decoder_input_ids).logits
    torch.testing.assert_close(actual, expected, atol=0, rtol=0)
    gen = json.loads((tmp_path / "generation_config.json").read_text())
    assert (gen["num_beams"], gen["length_penalty"]) == (4, 0.6)  # §6.1


@pytest.mark.parametrize("variant", ["paper", "pre_ln_learned_untied"])
def test_folder_saved_before_refactor_loads_with_same_logits(variant):
    """Folders saved by an earlier version of the modeling code (by
    tests/fixtures/make_saved_model_before_refactor.py) load with every weight in place and give the logits
    stored beside them: a rewrite of the model must keep both its state-dict keys and its arithmetic."""
    folder = SAVED_BEFORE_REFACTOR / variant
    # Saved before `init_method` existed (its default has changed since): loaded weights replace any init.
    assert "init_method" not in json.loads((folder / "config.json").read_text())
    model, info = VanillaTransformerForConditionalGeneration.from_pretrained(folder, output_loading_info=True)
    assert {name: entries for name, entries in info.items() if entries} == {}
    stored = load_file(folder / "expected_logits.safetensors")
    expected = stored.pop("logits")
    with torch.no_grad():
        logits = model.eval()(**stored).logits
    torch.testing.assert_close(logits, expected, atol=1e-6, rtol=1e-6)
    if variant == "paper":
        assert model.lm_head.weight is model.model.shared.weight
    else:
        assert model.lm_head.weight is not model.model.decoder.embed_tokens.weight
        assert model.model.encoder.embed_tokens is not model.model.decoder.embed_tokens


def test_untied_model_round_trip(tmp_path, padded_batch):
    config = tiny_config(
        share_encoder_decoder_embeddings=False, tie_word_embeddings=False, decoder_vocab_size=30
    )
    model = VanillaTransformerForConditionalGeneration(config).eval()
    model.save_pretrained(tmp_path)
    loaded, info = VanillaTransformerForConditionalGeneration.from_pretrained(
        tmp_path, output_loading_info=True
    )
    assert not info["missing_keys"] and not info["unexpected_keys"]
    assert loaded.lm_head.weight is not loaded.model.decoder.embed_tokens.weight
    decoder_input_ids = torch.tensor(DECODER_INPUT * 3)
    with torch.no_grad():
        torch.testing.assert_close(
            loaded.eval()(**padded_batch, decoder_input_ids=decoder_input_ids).logits,
            model(**padded_batch, decoder_input_ids=decoder_input_ids).logits,
        )


EMBEDDING_LAYOUTS = {
    "three_way_tied": {},
    "shared_inputs_separate_lm_head": {"tie_word_embeddings": False},
    "untied": {
        "share_encoder_decoder_embeddings": False,
        "tie_word_embeddings": False,
        "decoder_vocab_size": 30,
    },
}


@pytest.mark.parametrize("layout", EMBEDDING_LAYOUTS)
@pytest.mark.parametrize("model_class", [VanillaTransformerModel, VanillaTransformerForConditionalGeneration])
def test_checkpoint_without_any_weight_reports_every_parameter_missing(tmp_path, model_class, layout):
    """transformers' common test `test_model_weights_reload_no_missing_tied_weights` (in
    tests/test_modeling_common.py of the transformers source, v5.23): with a checkpoint that holds none of the
    weights, every parameter, the embedding matrices included, must be reported missing, and nothing else."""
    model_class(tiny_config(**EMBEDDING_LAYOUTS[layout])).save_pretrained(tmp_path)
    save_file({"tensor": torch.tensor([1, 2])}, tmp_path / "model.safetensors", metadata={"format": "pt"})
    reloaded, info = model_class.from_pretrained(tmp_path, output_loading_info=True)

    param_names = {name for name, _ in reloaded.named_parameters()} | {
        name for name, _ in reloaded.named_buffers()
    }
    missing = set(info["missing_keys"])
    # Tied names other than the one `named_parameters` lists are reported too; they are not "extra".
    storages = collections.defaultdict(list)
    for name, tensor in reloaded.state_dict().items():
        storages[tensor.untyped_storage().data_ptr()].append(name)
    extra_missing = missing - param_names
    for group in (names for names in storages.values() if len(names) > 1):
        if set(group) - extra_missing:
            extra_missing -= set(group)
    assert extra_missing == set()
    non_persistent = {name for name, _ in reloaded.named_buffers()} - set(reloaded.state_dict())
    ignored = {
        name
        for name in param_names
        if any(re.search(pattern, name) for pattern in reloaded._keys_to_ignore_on_load_missing or ())
    }
    assert param_names - missing - non_persistent == ignored == set()
    assert not any(p.device.type == "meta" for p in reloaded.parameters())


@pytest.mark.parametrize("model_class", [VanillaTransformerModel, VanillaTransformerForConditionalGeneration])
def test_checkpoint_without_shared_embedding_reports_it_missing(tmp_path, model_class):
    """A checkpoint lacking only the embedding matrix does not load silently with random embeddings."""
    torch.manual_seed(0)
    model = model_class(tiny_config())
    model.save_pretrained(tmp_path)
    weights = load_file(tmp_path / "model.safetensors")
    shared_key = next(key for key in weights if key.endswith("shared.weight"))
    del weights[shared_key]
    save_file(weights, tmp_path / "model.safetensors", metadata={"format": "pt"})

    reloaded, info = model_class.from_pretrained(tmp_path, output_loading_info=True)
    assert shared_key in info["missing_keys"]
    assert not info["unexpected_keys"]
    shared = reloaded.get_input_embeddings().weight
    assert shared.device.type == "cpu" and torch.isfinite(shared).all()  # re-initialised, not left empty
    assert not torch.equal(shared, model.get_input_embeddings().weight)


@pytest.mark.parametrize("layout", EMBEDDING_LAYOUTS)
@pytest.mark.parametrize("model_class", [VanillaTransformerModel, VanillaTransformerForConditionalGeneration])
def test_round_trip_reports_nothing_missing_and_keeps_ties(tmp_path, model_class, layout):
    config = tiny_config(**EMBEDDING_LAYOUTS[layout])
    torch.manual_seed(0)
    model = model_class(config).eval()
    model.save_pretrained(tmp_path)
    reloaded, info = model_class.from_pretrained(tmp_path, output_loading_info=True)
    assert {name: entries for name, entries in info.items() if entries} == {}
    for original in (model, reloaded):
        base = original if model_class is VanillaTransformerModel else original.model
        encoder_embedding = base.encoder.embed_tokens.weight
        decoder_embedding = base.decoder.embed_tokens.weight
        # `share_encoder_decoder_embeddings` alone decides the input tie, whatever `tie_word_embeddings` says.
        assert (encoder_embedding is decoder_embedding) == config.share_encoder_decoder_embeddings
        if config.share_encoder_decoder_embeddings:
            assert encoder_embedding is base.shared.weight
        if model_class is VanillaTransformerForConditionalGeneration:
            assert (original.lm_head.weight is decoder_embedding) == config.tie_word_embeddings
    for name, tensor in model.state_dict().items():
        torch.testing.assert_close(reloaded.state_dict()[name], tensor, atol=0, rtol=0, msg=name)


def test_auto_classes_know_the_model(tmp_path, tiny_model):
    tiny_model.save_pretrained(tmp_path)
    assert isinstance(AutoConfig.from_pretrained(tmp_path), VanillaTransformerConfig)
    assert isinstance(
        AutoModelForSeq2SeqLM.from_pretrained(tmp_path), VanillaTransformerForConditionalGeneration
    )
    assert isinstance(AutoModel.from_config(tiny_model.config), VanillaTransformerModel)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["model_type"] == "vanilla_transformer"
    assert config["auto_map"]["AutoModelForSeq2SeqLM"].endswith("VanillaTransformerForConditionalGeneration")
    assert (tmp_path / "modeling_vanilla_transformer.py").exists()


def test_corrupt_checkpoint_gives_clear_error(tmp_path, tiny_model):
    tiny_model.save_pretrained(tmp_path)
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    with pytest.raises(OSError, match=rf"{tmp_path}.*truncated or corrupt.*save the model again"):
        VanillaTransformerForConditionalGeneration.from_pretrained(tmp_path)
    with pytest.raises(OSError, match="truncated or corrupt"):
        AutoModelForSeq2SeqLM.from_pretrained(tmp_path)


@pytest.mark.parametrize("damage", ["all bytes", "the tensors' bytes"])
def test_garbage_weights_of_the_right_size_are_named_by_their_file(
    tmp_path, tiny_model, word_tokenizer, damage
):
    """Weights whose bytes are garbage but whose size is right (a copy gone wrong, a disk's damage): where the
    header goes, safetensors cannot read it; where only the tensors' bytes go, they read as floats, and the
    NaNs and infinities among them are what shows. Either is one line naming the file."""
    folder = save_model_folder(tiny_model, word_tokenizer, tmp_path / "model")
    weights = folder / "model.safetensors"
    data = weights.read_bytes()
    header = 8 + int.from_bytes(data[:8], "little")  # the length of the JSON header, then the header
    kept = 0 if damage == "all bytes" else header
    garbage = torch.randint(
        0, 256, (len(data) - kept,), dtype=torch.uint8, generator=torch.Generator().manual_seed(0)
    )
    weights.write_bytes(data[:kept] + garbage.numpy().tobytes())
    assert weights.stat().st_size == len(data)
    with pytest.raises(CorruptFileError) as raised:
        load_model_folder(folder)
    message = str(raised.value)
    assert str(weights) in message and "Download or save the model again" in message and "\n" not in message
    result = run_script_file(
        "translate.py", "--model", folder, "--device", "cpu", "--input", "-", cwd=tmp_path
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert lines[-1] == f"error: {message}"


def test_repairing_a_folder_whose_weights_do_not_read_is_refused_before_anything_changes(
    tmp_path, tiny_model, word_tokenizer
):
    from hf_vanilla_transformer.interop.updates import update_model_code

    folder = save_model_folder(tiny_model, word_tokenizer, tmp_path / "model")
    (folder / "modeling_vanilla_transformer.py").write_text("# an old copy\n", encoding="utf-8")
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(
        CorruptFileError, match=rf"{weights} is truncated or corrupt: its weights do not read"
    ):
        update_model_code(folder)
    assert (folder / "modeling_vanilla_transformer.py").read_text(encoding="utf-8") == "# an old copy\n"


REMOTE_CODE_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import torch
    from transformers import AutoModel, AutoModelForSeq2SeqLM, AutoTokenizer, pipeline
    folder = sys.argv[1]
    model = AutoModelForSeq2SeqLM.from_pretrained(folder, trust_remote_code=True).eval()
    bare = AutoModel.from_pretrained(folder, trust_remote_code=True)
    batch = json.loads(sys.argv[2])
    with torch.no_grad():
        logits = model(input_ids=torch.tensor(batch["input_ids"]),
                       attention_mask=torch.tensor(batch["attention_mask"]),
                       decoder_input_ids=torch.tensor(batch["decoder_input_ids"])).logits
    # As for any model with custom code, AutoTokenizer reads config.json and so is told to trust it too.
    tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
    pipe = pipeline(model=folder, trust_remote_code=True)
    texts = pipe(["ein hund läuft", "zwei katzen schlafen im park"], num_beams=2, max_new_tokens=5)
    # Without the package the folder's pipeline splits a text at sentence-final punctuation.
    paragraph = pipe("Ein hund läuft. Zwei katzen schlafen.", num_beams=2, max_new_tokens=5)
    paragraph = paragraph[0]["generated_text"]
    one_by_one = [pipe(s, num_beams=2, max_new_tokens=5)[0]["generated_text"].strip()
                  for s in ("Ein hund läuft.", "Zwei katzen schlafen.")]
    assert "hf_vanilla_transformer" not in sys.modules, "the package must not be needed"
    print(json.dumps({"logits": logits.tolist(), "class": type(model).__name__, "bare": type(bare).__name__,
                      "paragraph": paragraph, "one_by_one": one_by_one,
                      "tokenizer": type(tokenizer).__name__, "texts": texts}))
    """
)


def test_trust_remote_code_load_in_fresh_process(tmp_path, tiny_model, padded_batch, word_tokenizer):
    save_model_folder(tiny_model, word_tokenizer, tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert PIPELINE_TASK in config["custom_pipelines"]
    assert (tmp_path / "pipeline_seq2seq.py").exists()
    decoder_input_ids = torch.tensor(DECODER_INPUT * 3)
    batch = {
        **{k: v.tolist() for k, v in padded_batch.items()},
        "decoder_input_ids": decoder_input_ids.tolist(),
    }
    result = subprocess.run(
        [sys.executable, "-c", REMOTE_CODE_SCRIPT, str(tmp_path), json.dumps(batch)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    output = json.loads(result.stdout.strip().splitlines()[-1])
    assert output["class"] == "VanillaTransformerForConditionalGeneration"
    assert output["paragraph"] == " ".join(output["one_by_one"])
    assert (output["bare"], config["auto_map"]["AutoModel"]) == (
        "VanillaTransformerModel",
        "modeling_vanilla_transformer.VanillaTransformerModel",
    )
    assert output["tokenizer"] in ("TokenizersBackend", "PreTrainedTokenizerFast")  # a fast (Rust) tokenizer
    with torch.no_grad():
        expected = tiny_model(**padded_batch, decoder_input_ids=decoder_input_ids).logits
    torch.testing.assert_close(torch.tensor(output["logits"]), expected, atol=1e-6, rtol=0)
    assert len(output["texts"]) == 2 and all(isinstance(t[0]["generated_text"], str) for t in output["texts"])


# 8. Pipeline -------------------------------------------------------------------------------------------


def test_registered_pipeline_text_in_text_out(tiny_model, word_tokenizer):
    pipe = pipeline(PIPELINE_TASK, model=tiny_model, tokenizer=word_tokenizer)
    single = pipe("ein hund läuft im park", num_beams=1, max_new_tokens=6)
    assert isinstance(single, list) and isinstance(single[0]["generated_text"], str)
    expected_ids = tiny_model.generate(
        **word_tokenizer("ein hund läuft im park", return_tensors="pt"), num_beams=1, max_new_tokens=6
    )
    assert single[0]["generated_text"] == word_tokenizer.decode(expected_ids[0], skip_special_tokens=True)

    batched = pipe(
        ["ein hund", "zwei katzen schlafen im park", "a dog"], batch_size=2, num_beams=1, max_new_tokens=6
    )
    assert len(batched) == 3
    for text, result in zip(["ein hund", "zwei katzen schlafen im park", "a dog"], batched, strict=True):
        assert result == pipe(text, num_beams=1, max_new_tokens=6)  # batching with padding changes nothing

    several = pipe("a dog runs", num_beams=3, num_return_sequences=3, max_new_tokens=4)
    assert len(several) == 3
    for empty in ("", "  \n"):  # refused, not answered with a sentence made up from nothing
        with pytest.raises(ValueError, match="got an empty input"):
            pipe(empty)


def test_a_saved_folder_loads_with_the_installed_package_as_the_readme_says(
    tmp_path, tiny_model, word_tokenizer
):
    """With the package imported, `from_pretrained` needs no `trust_remote_code`; the folder's own pipeline
    code runs only when trusted, and the installed pipeline class is the way around that."""
    from hf_vanilla_transformer import Seq2SeqGenerationPipeline

    folder = save_model_folder(tiny_model, word_tokenizer, tmp_path / "model")
    assert isinstance(
        AutoModelForSeq2SeqLM.from_pretrained(folder), VanillaTransformerForConditionalGeneration
    )
    with pytest.raises(ValueError, match="trust_remote_code=True"):
        pipeline(PIPELINE_TASK, model=str(folder))
    pipe = pipeline(PIPELINE_TASK, model=str(folder), pipeline_class=Seq2SeqGenerationPipeline)
    assert isinstance(pipe, Seq2SeqGenerationPipeline)
    assert pipe("ein hund", num_beams=1, max_new_tokens=4) == pipeline(
        PIPELINE_TASK, model=tiny_model, tokenizer=word_tokenizer
    )("ein hund", num_beams=1, max_new_tokens=4)


def test_the_installed_pipeline_refuses_series_input_outside_the_models_grammar():
    from hf_vanilla_transformer import Seq2SeqGenerationPipeline

    folder = Path(__file__).resolve().parents[1] / "model_cards" / "vanilla-transformer-series"
    pipe = pipeline(PIPELINE_TASK, model=str(folder), pipeline_class=Seq2SeqGenerationPipeline)
    with pytest.raises(ValueError, match=r"'sin\(x\)' is outside the model's grammar: exp, sin"):
        pipe(["exp(2*a*x)", "sin(x)*exp(x)"], num_beams=1)
    assert pipe("exp(2*a*x)", num_beams=1)[0]["generated_text"].endswith("O(x**6)")


PARAGRAPH = (
    "Ein Hund rennt durch den Schnee. Eine ältere Frau sitzt auf einer Bank und liest eine Zeitung. Drei "
    "Musiker spielen auf der Straße."
)


def test_a_paragraph_is_translated_as_its_sentences_one_by_one():
    """The shipped Multi30k model, trained on single sentences: given whole, it drops the third; split, the
    paragraph is the three translations, in order, with the line breaks of the text."""
    from hf_vanilla_transformer import Seq2SeqGenerationPipeline
    from hf_vanilla_transformer.sentences import paragraph_sentences

    folder = Path(__file__).resolve().parents[1] / "model_cards" / "vanilla-transformer-multi30k-de-en"
    pipe = pipeline(PIPELINE_TASK, model=str(folder), pipeline_class=Seq2SeqGenerationPipeline)
    sentences = paragraph_sentences(PARAGRAPH, "de")
    assert len(sentences) == 3
    one_by_one = [pipe(sentence)[0]["generated_text"] for sentence in sentences]
    assert pipe(PARAGRAPH) == [{"generated_text": " ".join(one_by_one)}]
    whole = pipe(PARAGRAPH, split_sentences=False)[0]["generated_text"]
    assert whole != " ".join(one_by_one)  # the failure being fixed
    document = pipe([f"{sentences[0]}\n\n{sentences[1]} {sentences[2]}", sentences[2]])
    assert document == [
        [{"generated_text": f"{one_by_one[0]}\n\n{one_by_one[1]} {one_by_one[2]}"}],
        [{"generated_text": one_by_one[2]}],
    ]
    with pytest.raises(ValueError, match="split_sentences=False"):
        pipe(PARAGRAPH, num_return_sequences=2)
    with pytest.raises(ValueError, match="No sentence rules for source_lang='xx'"):
        pipe(PARAGRAPH, source_lang="xx")


def test_a_byte_order_mark_or_another_systems_line_ends_change_no_translation():
    """A text that starts with a UTF-8 byte-order mark (a file saved by Notepad), or whose lines end in CRLF
    or U+2028, translates as the plain text: the pipeline reads it as the package's file readers do
    (`sentences.normalize_text`). Unread, the mark is an unknown token that changes the translation ("A fit
    dog runs in the park"), and the series model's grammar refuses it."""
    from hf_vanilla_transformer import Seq2SeqGenerationPipeline

    cards = Path(__file__).resolve().parents[1] / "model_cards"
    pipe = pipeline(
        PIPELINE_TASK, model=str(cards / "vanilla-transformer-multi30k-de-en"),
        pipeline_class=Seq2SeqGenerationPipeline, num_beams=1,
    )  # fmt: skip
    sentence = "Ein Hund rennt im Park."
    plain = pipe(sentence)
    assert pipe("\ufeff" + sentence) == plain
    assert pipe(["\ufeff" + sentence, sentence], split_sentences=False) == [plain, plain]
    text = f"{sentence}\nZwei Katzen schlafen."
    assert pipe(text.replace("\n", "\r\n")) == pipe(text.replace("\n", "\u2028")) == pipe(text)
    assert pipe(text)[0]["generated_text"].count("\n") == 1
    series = pipeline(
        PIPELINE_TASK, model=str(cards / "vanilla-transformer-series"),
        pipeline_class=Seq2SeqGenerationPipeline, num_beams=1,
    )  # fmt: skip
    assert series("\ufeffexp(2*a*x)\r\n") == series("exp(2*a*x)")


def test_a_text_is_split_by_the_rules_of_the_models_source_language(monkeypatch):
    """The Multi30k model records that it reads German (`langs`): "am 3. Mai" and "z. B." end no sentence
    there, as they would by English rules; `source_lang` names other rules per call."""
    from hf_vanilla_transformer import Seq2SeqGenerationPipeline
    from hf_vanilla_transformer import pipeline_seq2seq as module

    folder = Path(__file__).resolve().parents[1] / "model_cards" / "vanilla-transformer-multi30k-de-en"
    pipe = pipeline(PIPELINE_TASK, model=str(folder), pipeline_class=Seq2SeqGenerationPipeline)
    assert pipe.model.config.langs == ["de", "en"]
    generated = []
    monkeypatch.setattr(module.Pipeline, "__call__", lambda self, texts, *a, **k: generated.append(texts)
                        or [[{"generated_text": text}] for text in texts])  # fmt: skip
    text = "Ein Mann, z. B. ein Arbeiter, steht am 3. Mai vor dem Haus. Dr. Müller sieht zu."
    assert pipe(text) == [{"generated_text": text}]
    assert sorted(generated[-1]) == sorted(["Ein Mann, z. B. ein Arbeiter, steht am 3. Mai vor dem Haus.",
                                            "Dr. Müller sieht zu."])  # fmt: skip
    pipe(text, source_lang="en")
    assert len(generated[-1]) == 4  # "z." | "B. ... am 3." | "Mai vor dem Haus." | "Dr. Müller sieht zu."


def test_a_text_longer_than_the_positions_is_split_and_one_sentence_longer_is_refused(word_tokenizer):
    torch.manual_seed(0)
    model = VanillaTransformerForConditionalGeneration(tiny_config(max_position_embeddings=12)).eval()
    pipe = pipeline(PIPELINE_TASK, model=model, tokenizer=word_tokenizer, num_beams=1, max_new_tokens=4)
    text = "Ein hund läuft im park. Zwei katzen schlafen im park. Ein hund läuft."  # 3 x < 12 tokens
    assert len(word_tokenizer(text)["input_ids"]) > 12
    assert isinstance(pipe(text)[0]["generated_text"], str)
    with pytest.raises(ValueError, match="max_position_embeddings=12"):
        pipe(text, split_sentences=False)
    with pytest.raises(ValueError, match="max_position_embeddings=12"):  # no boundary: one sentence, too long
        pipe("ein hund läuft im park zwei katzen schlafen im park ein hund läuft")


def test_series_input_is_never_split_and_without_rules_a_text_is_cut_at_punctuation(monkeypatch):
    from hf_vanilla_transformer import Seq2SeqGenerationPipeline, sentences
    from hf_vanilla_transformer import pipeline_seq2seq as module

    calls = []
    monkeypatch.setattr(module, "split_document", lambda text, language: calls.append(text) or [[text]])
    folder = Path(__file__).resolve().parents[1] / "model_cards" / "vanilla-transformer-series"
    pipe = pipeline(PIPELINE_TASK, model=str(folder), pipeline_class=Seq2SeqGenerationPipeline)
    pipe("exp(2*a*x)", num_beams=1)
    assert calls == []
    # Whose rules: those asked for, else the model's source language, else English; none for a language
    # pysbd has no rules for, or without pysbd (a folder's pipeline where it is not installed).
    rules = sentences.sentence_rules
    assert rules(None, ["de", "en"]) == "de" and rules("fr", ["de", "en"]) == "fr"
    assert rules(None, None) == "en" and rules(None, ["mul", "en"]) is None
    monkeypatch.setattr(sentences, "pysbd", None)
    assert rules("de", ["de", "en"]) is None
    assert sentences.paragraph_sentences(PARAGRAPH, None) == [
        "Ein Hund rennt durch den Schnee.",
        "Eine ältere Frau sitzt auf einer Bank und liest eine Zeitung.",
        "Drei Musiker spielen auf der Straße.",
    ]
    assert sentences.plain_sentences("Es kostet 3.50 Euro. Gut.") == ["Es kostet 3.50 Euro.", "Gut."]


def test_pipeline_rejects_non_text(tiny_model, word_tokenizer):
    pipe = pipeline(PIPELINE_TASK, model=tiny_model, tokenizer=word_tokenizer)
    with pytest.raises(TypeError, match="string"):
        pipe(123)


# generate() strategies ---------------------------------------------------------------------------------


def test_every_generate_strategy_runs(tiny_model, padded_batch, word_tokenizer):
    torch.manual_seed(0)
    greedy = tiny_model.generate(**padded_batch, num_beams=1, max_new_tokens=5)
    assert greedy.shape[0] == 3 and greedy[:, 0].eq(1).all()  # starts with decoder_start_token_id
    beams = tiny_model.generate(
        **padded_batch,
        num_beams=4,
        num_return_sequences=2,
        length_penalty=0.6,
        early_stopping=True,
        max_new_tokens=5,
    )
    assert beams.shape[0] == 6
    sampled = tiny_model.generate(
        **padded_batch, do_sample=True, temperature=0.7, top_k=5, top_p=0.9, num_beams=1, max_new_tokens=5
    )
    assert sampled.shape[0] == 3
    no_repeat = tiny_model.generate(
        **padded_batch, num_beams=1, no_repeat_ngram_size=1, max_new_tokens=8, min_new_tokens=8
    )
    for row in no_repeat[:, 1:].tolist():
        assert len(row) == len(set(row)), row

    streamer = TextIteratorStreamer(word_tokenizer, skip_special_tokens=True)
    inputs = word_tokenizer("ein hund läuft", return_tensors="pt")
    tiny_model.generate(**inputs, num_beams=1, max_new_tokens=4, streamer=streamer)
    streamed = "".join(streamer)
    direct = tiny_model.generate(**inputs, num_beams=1, max_new_tokens=4)
    assert streamed.split() == word_tokenizer.decode(direct[0], skip_special_tokens=True).split()


def test_default_generate_uses_paper_beam_settings(tiny_model, padded_batch):
    out = tiny_model.generate(
        **padded_batch, max_new_tokens=4, return_dict_in_generate=True, output_scores=True
    )
    assert out.beam_indices is not None  # beam search (num_beams=4) without asking for it


# Training ---------------------------------------------------------------------------------------------


def test_seq2seq_trainer_runs_two_steps(tmp_path, tiny_model, word_tokenizer):
    pairs = [("ein hund läuft", "a dog runs"), ("zwei katzen schlafen", "two cats sleep")] * 4
    features = [word_tokenizer(src, text_target=tgt) for src, tgt in pairs]
    args = Seq2SeqTrainingArguments(
        output_dir=str(tmp_path),
        max_steps=2,
        per_device_train_batch_size=4,
        gradient_accumulation_steps=2,
        learning_rate=1e-3,
        report_to=[],
        save_strategy="no",
        logging_steps=1,
        use_cpu=True,
    )
    before = tiny_model.model.shared.weight.detach().clone()
    trainer = Seq2SeqTrainer(
        model=tiny_model.train(),
        args=args,
        train_dataset=features,
        data_collator=DataCollatorForSeq2Seq(word_tokenizer, model=tiny_model),
    )
    result = trainer.train()
    assert result.global_step == 2 and torch.isfinite(torch.tensor(result.training_loss))
    assert not torch.equal(before, tiny_model.model.shared.weight)
    assert trainer.model_accepts_loss_kwargs  # so it passes num_items_in_batch


@pytest.mark.parametrize("layout", EMBEDDING_LAYOUTS)
def test_one_shared_vocabulary_is_one_module_built_loaded_or_resized(tmp_path, layout):
    """Where the stacks share one vocabulary, their `embed_tokens` are the `shared` module itself once
    built, loaded or resized: a sharding engine that wraps the input embeddings then wraps every holder of
    the matrix (tests/test_scale_out.py trains it under FSDP2). Separate vocabularies stay two modules."""
    config = tiny_config(**EMBEDDING_LAYOUTS[layout])
    torch.manual_seed(0)
    built = VanillaTransformerForConditionalGeneration(config)
    built.save_pretrained(tmp_path)
    loaded = VanillaTransformerForConditionalGeneration.from_pretrained(tmp_path)
    resized = VanillaTransformerForConditionalGeneration.from_pretrained(tmp_path)
    resized.resize_token_embeddings(config.vocab_size + 8)
    for model in (built, loaded, resized):
        base = model.model
        shared = config.share_encoder_decoder_embeddings
        assert (base.encoder.embed_tokens is base.decoder.embed_tokens) == shared
        if shared:
            assert base.encoder.embed_tokens is base.shared and base.get_input_embeddings() is base.shared
