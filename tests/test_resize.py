"""Resizing the vocabulary, as users do after adding tokens, for each vocabulary layout: the configuration
stays consistent, the right matrices change, and the model saves, reloads with the same logits and
generates."""

import pytest
import torch

from hf_vanilla_transformer import VanillaTransformerForConditionalGeneration

from .conftest import TINY_VOCAB, tiny_config

LAYOUTS = {
    # §3.4: one matrix for encoder input, decoder input and output layer.
    "shared_tied": {},
    # One vocabulary, an output layer of its own (with a bias, as Marian's final_logits_bias).
    "shared_untied_head": {"tie_word_embeddings": False, "output_bias": True},
    # Separate source and target vocabularies; the output layer tied to the decoder's embeddings.
    "separate": {"share_encoder_decoder_embeddings": False, "decoder_vocab_size": 23},
}


def _model(layout: str) -> VanillaTransformerForConditionalGeneration:
    torch.manual_seed(0)
    return VanillaTransformerForConditionalGeneration(tiny_config(**LAYOUTS[layout])).eval()


def _save_reload_and_generate(model, tmp_path) -> None:
    model.save_pretrained(tmp_path)
    reloaded, info = VanillaTransformerForConditionalGeneration.from_pretrained(
        tmp_path, output_loading_info=True
    )
    assert not any(info.values()), info
    inputs = {"input_ids": torch.tensor([[5, 9, model.config.vocab_size - 1, 2]])}
    decoder_input_ids = torch.tensor([[1, 7, model.config.decoder_vocab_size - 1]])
    with torch.no_grad():
        expected = model(**inputs, decoder_input_ids=decoder_input_ids).logits
        got = reloaded.eval()(**inputs, decoder_input_ids=decoder_input_ids).logits
    assert got.shape[-1] == model.config.decoder_vocab_size
    torch.testing.assert_close(got, expected)
    generated = reloaded.generate(**inputs, num_beams=2, max_new_tokens=4)
    assert generated.shape[0] == 1 and int(generated.max()) < model.config.decoder_vocab_size


@pytest.mark.parametrize("new_size", [TINY_VOCAB + 10, TINY_VOCAB - 8])
@pytest.mark.parametrize("layout", ["shared_tied", "shared_untied_head"])
def test_resizing_one_shared_vocabulary_resizes_everything(layout, new_size, tmp_path):
    model = _model(layout)
    old_rows = model.model.shared.weight[:10].clone()
    model.resize_token_embeddings(new_size)
    config = model.config
    assert config.vocab_size == config.decoder_vocab_size == new_size
    shared = model.model.shared.weight
    assert shared.shape == (new_size, 32)
    assert model.model.encoder.embed_tokens.weight is shared
    assert model.model.decoder.embed_tokens.weight is shared
    assert model.lm_head.weight.shape == (new_size, 32)
    assert (model.lm_head.weight is shared) == config.tie_word_embeddings
    if model.lm_head.bias is not None:
        assert model.lm_head.bias.shape == (new_size,)
    torch.testing.assert_close(shared[:10], old_rows)  # existing tokens keep their vectors
    _save_reload_and_generate(model, tmp_path)


def test_resizing_separate_vocabularies_resizes_each_side_on_its_own(tmp_path):
    model = _model("separate")
    model.resize_token_embeddings(TINY_VOCAB + 5)
    assert model.config.vocab_size == TINY_VOCAB + 5
    assert model.model.encoder.embed_tokens.weight.shape[0] == TINY_VOCAB + 5
    assert model.config.decoder_vocab_size == 23  # the target side is untouched
    assert model.model.decoder.embed_tokens.weight.shape[0] == model.lm_head.weight.shape[0] == 23

    old_target_rows = model.model.decoder.embed_tokens.weight.clone()
    model.resize_decoder_token_embeddings(30)
    assert model.config.decoder_vocab_size == 30
    assert model.model.decoder.embed_tokens.weight.shape[0] == 30
    assert model.lm_head.weight is model.model.decoder.embed_tokens.weight
    torch.testing.assert_close(model.model.decoder.embed_tokens.weight[:23], old_target_rows)
    assert model.config.vocab_size == TINY_VOCAB + 5
    _save_reload_and_generate(model, tmp_path)


def test_resize_decoder_token_embeddings_on_a_shared_vocabulary_names_the_right_call():
    with pytest.raises(ValueError, match="resize_token_embeddings"):
        _model("shared_tied").resize_decoder_token_embeddings(50)


def test_resizing_the_bare_model_keeps_its_configuration_consistent(tmp_path):
    model = _model("shared_tied").model
    model.resize_token_embeddings(TINY_VOCAB + 3)
    assert model.config.vocab_size == model.config.decoder_vocab_size == TINY_VOCAB + 3
    model.save_pretrained(tmp_path)  # validates the configuration
