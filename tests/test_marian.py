"""MarianMTModel checkpoints converted to this package's model compute what they computed (a random tiny
Marian model made here: nothing is downloaded)."""

import pytest
import torch
from transformers import MarianConfig, MarianMTModel

from hf_vanilla_transformer import VanillaTransformerForConditionalGeneration
from hf_vanilla_transformer.marian import convert_marian_model

VOCAB, PAD, EOS = 40, 39, 0


def _marian(**overrides) -> MarianMTModel:
    """OPUS-MT's layout at toy size: swish, scaled embeddings, pad as decoder start, </s> = 0."""
    config = MarianConfig(
        vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64,
        activation_function="swish", scale_embedding=True, pad_token_id=PAD, decoder_start_token_id=PAD,
        eos_token_id=EOS, forced_eos_token_id=EOS, **overrides,
    )  # fmt: skip
    torch.manual_seed(0)
    model = MarianMTModel(config).eval()
    with (
        torch.no_grad()
    ):  # a bias of zero (Marian's initialisation) would not show whether it is carried over
        model.final_logits_bias.normal_(std=2.0)
    return model


@pytest.mark.parametrize(
    "overrides", [{}, {"share_encoder_decoder_embeddings": False, "tie_word_embeddings": False}]
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
