"""MarianMTModel checkpoints converted to this package's model compute what they computed (a random tiny
Marian model made here: nothing is downloaded)."""

import json

import pytest
import torch
from transformers import MarianConfig, MarianMTModel

from hf_vanilla_transformer import VanillaTransformerForConditionalGeneration
from hf_vanilla_transformer.tasks.translation.marian import convert_marian_model

from .script_runner import run_code, run_script_file

VOCAB, PAD, EOS = 40, 39, 0


def _marian(**overrides) -> MarianMTModel:
    """OPUS-MT's layout at toy size: swish, scaled embeddings, pad as decoder start, </s> = 0."""
    options = dict(
        vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64,
        activation_function="swish", scale_embedding=True, pad_token_id=PAD, decoder_start_token_id=PAD,
        eos_token_id=EOS, forced_eos_token_id=EOS,
    )  # fmt: skip
    torch.manual_seed(0)
    model = MarianMTModel(MarianConfig(**{**options, **overrides})).eval()
    # Marian initialises the bias to zero, which would not show whether it is carried over.
    with torch.no_grad():
        model.final_logits_bias.normal_(std=2.0)
    return model


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"activation_function": "gelu"},
        {"activation_function": "relu", "d_model": 48, "encoder_ffn_dim": 96, "encoder_layers": 3},
        {"share_encoder_decoder_embeddings": False, "tie_word_embeddings": False},
    ],
    ids=["opus-mt-swish", "gelu", "relu-wider-deeper-encoder", "separate-vocabularies"],
)
def test_converted_marian_model_gives_the_same_logits_and_generations(overrides, tmp_path):
    marian = _marian(**overrides)
    model = convert_marian_model(marian)
    generator = torch.Generator().manual_seed(1)
    input_ids = torch.randint(1, PAD, (3, 7), generator=generator)
    attention_mask = torch.ones_like(input_ids)
    input_ids[2, 5:], attention_mask[2, 5:] = PAD, 0
    decoder_input_ids = torch.cat(
        [torch.full((3, 1), PAD), torch.randint(1, PAD, (3, 5), generator=generator)], 1
    )
    with torch.no_grad():
        expected = marian(
            input_ids, attention_mask=attention_mask, decoder_input_ids=decoder_input_ids
        ).logits
        logits = model(input_ids, attention_mask=attention_mask, decoder_input_ids=decoder_input_ids).logits
    torch.testing.assert_close(logits, expected, atol=1e-5, rtol=1e-5)

    for settings in ({"num_beams": 1}, {"num_beams": 4, "length_penalty": 0.6}):
        kwargs = {"attention_mask": attention_mask, "max_new_tokens": 8, "do_sample": False, **settings}
        with torch.no_grad():
            assert (
                model.generate(input_ids, **kwargs).tolist() == marian.generate(input_ids, **kwargs).tolist()
            )

    model.save_pretrained(tmp_path)
    reloaded, info = VanillaTransformerForConditionalGeneration.from_pretrained(
        tmp_path, output_loading_info=True
    )
    assert (
        not info["missing_keys"]
        and reloaded.config.sinusoid_layout == "halves"
        and reloaded.config.output_bias
    )
    with torch.no_grad():
        again = reloaded(input_ids, attention_mask=attention_mask, decoder_input_ids=decoder_input_ids).logits
    torch.testing.assert_close(again, expected, atol=1e-5, rtol=1e-5)


def test_marian_positions_that_are_not_the_sinusoids_are_refused():
    marian = _marian()
    with torch.no_grad():
        marian.model.encoder.embed_positions.weight.add_(1.0)
    with pytest.raises(ValueError, match="embed_positions.weight is not the sinusoid table"):
        convert_marian_model(marian)


FRESH_PROCESS = """
import json, sys
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer
model = AutoModelForSeq2SeqLM.from_pretrained(sys.argv[1], trust_remote_code=True)
tokenizer = AutoTokenizer.from_pretrained(sys.argv[1], trust_remote_code=True)
ids = model.generate(**tokenizer(sys.argv[2:], return_tensors="pt", padding=True))
assert "hf_vanilla_transformer" not in sys.modules
print(json.dumps(ids.tolist()))
"""

SENTENCES = [
    "ein hund läuft im park",
    "zwei katzen schlafen",
    "a dog runs in the park",
    "two cats sleep",
    "der hund schläft im haus",
    "the dog sleeps in the house",
]


def _marian_folder(folder) -> MarianMTModel:
    """A saved Marian model with a real Marian tokenizer (sentencepiece, as OPUS-MT ships it)."""
    import json

    import sentencepiece
    from transformers import MarianTokenizer

    folder.mkdir()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(SENTENCES * 20), model_prefix=str(folder / "spm"), vocab_size=40,
        model_type="bpe", character_coverage=1.0, hard_vocab_limit=False, minloglevel=2,
    )  # fmt: skip
    pieces = sentencepiece.SentencePieceProcessor(model_file=str(folder / "spm.model"))
    vocab = {pieces.id_to_piece(i): i for i in range(pieces.get_piece_size())}
    vocab["<pad>"] = len(vocab)
    (folder / "vocab.json").write_text(json.dumps(vocab))
    spm, vocab_file = str(folder / "spm.model"), str(folder / "vocab.json")
    tokenizer = MarianTokenizer(spm, spm, vocab_file, source_lang="de", target_lang="en")  # as OPUS-MT's
    config = MarianConfig(
        vocab_size=len(vocab), d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64,
        activation_function="swish", scale_embedding=True, pad_token_id=vocab["<pad>"],
        decoder_start_token_id=vocab["<pad>"], eos_token_id=vocab["</s>"], forced_eos_token_id=vocab["</s>"],
    )  # fmt: skip
    torch.manual_seed(0)
    marian = MarianMTModel(config).eval()
    with torch.no_grad():
        marian.final_logits_bias.normal_(std=0.5)
    marian.generation_config.num_beams, marian.generation_config.max_length = 3, 12
    marian.save_pretrained(folder / "model")
    tokenizer.save_pretrained(folder / "model")
    return marian


def test_convert_script_writes_a_folder_that_decodes_as_marian_did(tmp_path):
    """Weights, config, Marian's tokenizer files and generation config, our code: `generate()` with no
    arguments gives Marian's output, through the Auto classes and the pipeline."""

    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, pipeline

    marian = _marian_folder(tmp_path / "marian")
    converted = run_script_file(
        "convert_marian.py", "--model", tmp_path / "marian" / "model", "--output_dir", tmp_path / "converted",
        cwd=tmp_path,
    )  # fmt: skip
    assert converted.returncode == 0, converted.stderr[-3000:]
    folder = tmp_path / "converted"
    assert (folder / "model.safetensors").is_file() and (folder / "modeling_vanilla_transformer.py").is_file()
    model = AutoModelForSeq2SeqLM.from_pretrained(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert type(model).__name__ == "VanillaTransformerForConditionalGeneration"
    assert model.generation_config.num_beams == 3 and model.generation_config.max_length == 12
    assert model.config.langs == ["de", "en"]  # the tokenizer's languages: the pipeline's sentence rules
    batch = tokenizer(SENTENCES[:3], return_tensors="pt", padding=True)
    with torch.no_grad():
        assert model.generate(**batch).tolist() == marian.generate(**batch).tolist()
    pipe = pipeline(model=str(folder), trust_remote_code=True)
    texts = [rows[0]["generated_text"] for rows in pipe(SENTENCES[:2])]  # one list of outputs per input
    expected = tokenizer.batch_decode(marian.generate(**tokenizer(SENTENCES[:2], return_tensors="pt",
                                      padding=True)), skip_special_tokens=True)  # fmt: skip
    assert texts == expected
    for sentence in SENTENCES:  # the tokenizer round trip
        assert tokenizer.decode(tokenizer(sentence)["input_ids"], skip_special_tokens=True) == sentence

    # A process that never imported this package: the folder carries its code.
    fresh = run_code(FRESH_PROCESS, folder, *SENTENCES[:3], cwd=tmp_path)
    assert fresh.returncode == 0, fresh.stderr[-3000:]
    with torch.no_grad():
        assert json.loads(fresh.stdout) == marian.generate(**batch).tolist()


def test_converted_model_fine_tunes_with_the_opus_mt_recipe(tmp_path):
    """scripts/recipes/opus_mt_multi30k.yaml on a converted Marian folder: the Trainer starts from its weights
    and Marian tokenizer, the training loss falls on a small parallel set, and the fine-tuned folder keeps
    the tokenizer and generation config and still loads without this package."""
    from pathlib import Path

    from datasets import Dataset, DatasetDict

    from hf_vanilla_transformer.tasks.translation.marian import convert_marian

    _marian_folder(tmp_path / "marian")
    convert_marian(tmp_path / "marian" / "model", tmp_path / "converted")
    pairs = [{"de": de, "en": en} for de, en in zip(SENTENCES[::2], SENTENCES[1::2], strict=True)]
    DatasetDict(
        train=Dataset.from_dict({"translation": pairs * 8}),
        validation=Dataset.from_dict({"translation": pairs}),
    ).save_to_disk(tmp_path / "data")
    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "tuned"
    tuned = run_script_file(
        "train.py", root / "scripts/recipes/opus_mt_multi30k.yaml",
        "--model", tmp_path / "converted", "--tokenizer", tmp_path / "converted",
        "--dataset", tmp_path / "data", "--output_dir", out, "--max_steps", "30",
        "--learning_rate", "3e-3", "--warmup_steps", "0", "--max_tokens", "64", "--logging_steps", "10",
        "--eval_steps", "15", "--save_steps", "15", "--generation_max_length", "12",
        "--max_source_length", "64", "--max_target_length", "64",  # the tiny Marian's positions
        cwd=tmp_path,
    )  # fmt: skip
    assert tuned.returncode == 0, tuned.stderr[-3000:]
    losses = [json.loads(line)["loss"] for line in (out / "loss_log.jsonl").read_text().splitlines()
              if "loss" in json.loads(line)]  # fmt: skip
    assert losses[-1] < losses[0] - 0.3, losses  # 30 steps from a random start on 24 pairs
    assert (out / "final" / "source.spm").is_file() and (out / "final" / "generation_config.json").is_file()
    fresh = run_code(FRESH_PROCESS, out / "final", *SENTENCES[:2], cwd=tmp_path)
    assert fresh.returncode == 0, fresh.stderr[-3000:]
    assert len(json.loads(fresh.stdout)) == 2


def test_ctranslate2_export_of_a_converted_folder_points_to_ctranslate2s_marian_converter(tmp_path):
    pytest.importorskip("ctranslate2")  # the [ctranslate2] extra; dev installs it
    from hf_vanilla_transformer.interop.ctranslate2_export import convert_to_ctranslate2
    from hf_vanilla_transformer.tasks.translation.marian import convert_marian

    _marian_folder(tmp_path / "marian")
    convert_marian(tmp_path / "marian" / "model", tmp_path / "converted")
    with pytest.raises(ValueError, match="MarianTokenizer, not a fast tokenizer.*ct2-transformers-converter"):
        convert_to_ctranslate2(tmp_path / "converted", tmp_path / "ct2")
    assert not (tmp_path / "ct2").exists()


def test_a_folder_that_is_not_a_marian_model_is_refused(tmp_path):
    from hf_vanilla_transformer import VanillaTransformerConfig
    from hf_vanilla_transformer.tasks.translation.marian import convert_marian

    VanillaTransformerConfig.from_preset("transformer-tiny", vocab_size=40).save_pretrained(tmp_path / "ours")
    with pytest.raises(ValueError, match=r"holds a 'vanilla_transformer' model .*\(model_type 'marian'\)"):
        convert_marian(tmp_path / "ours", tmp_path / "out")


def test_convert_script_names_a_missing_folder(tmp_path):
    result = run_script_file(
        "convert_marian.py", "--model", "/nonexistent/marian", "--output_dir", tmp_path / "out", cwd=tmp_path
    )
    assert result.returncode == 2 and "No Marian model folder at /nonexistent/marian" in result.stderr
