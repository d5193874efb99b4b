"""Import MarianMTModel checkpoints (the OPUS-MT models on the Hub and others) into this package's model.

MarianMTModel is the same encoder-decoder Transformer, post-LN, with sinusoidal positions; where it departs
from the paper's defaults, a config flag of this package says so: its sinusoids are laid out as halves
(`sinusoid_layout="halves"`), its output projection has a bias (`final_logits_bias`, `output_bias=True`), and
its activation and special-token ids are its own. Its weights have this package's names, but for the
feed-forward layers (`fc1`/`fc2` beside the attention, `mlp.fc1`/`mlp.fc2` here). A converted model computes
what the Marian model computes; `tests/test_marian.py` checks logits and generated ids.
"""

from __future__ import annotations

import re
from pathlib import Path

import torch

from ...configuration_vanilla_transformer import VanillaTransformerConfig, check_languages
from ...errors import MissingPathError, UsageError
from ...extras import require
from ...modeling_vanilla_transformer import (
    VanillaTransformerForConditionalGeneration,
    sinusoidal_position_table,
)
from ...readers import is_local_path
from . import TranslationTask

# Marian's positions are fixed sinusoids, never trained: they are dropped, after checking they are the table
# this package builds (a checkpoint with other positions would not compute the same here).
_POSITIONS = re.compile(r"model\.(encoder|decoder)\.embed_positions\.weight")
_FEED_FORWARD = re.compile(r"(model\.(?:encoder|decoder)\.layers\.\d+\.)(fc[12]\.(?:weight|bias))")


def config_from_marian(marian_config) -> VanillaTransformerConfig:
    """This package's configuration of a Marian model: the same sizes, ids and dropouts, plus the flags for
    Marian's departures from the paper."""
    if getattr(marian_config, "normalize_before", False) or getattr(
        marian_config, "layernorm_embedding", False
    ):
        raise UsageError("Only post-LN Marian models without an embedding LayerNorm can be converted.")
    return VanillaTransformerConfig(
        vocab_size=marian_config.vocab_size,
        decoder_vocab_size=marian_config.decoder_vocab_size or marian_config.vocab_size,
        d_model=marian_config.d_model,
        encoder_layers=marian_config.encoder_layers,
        decoder_layers=marian_config.decoder_layers,
        encoder_attention_heads=marian_config.encoder_attention_heads,
        decoder_attention_heads=marian_config.decoder_attention_heads,
        encoder_ffn_dim=marian_config.encoder_ffn_dim,
        decoder_ffn_dim=marian_config.decoder_ffn_dim,
        activation_function=marian_config.activation_function,
        dropout=marian_config.dropout,
        attention_dropout=marian_config.attention_dropout,
        activation_dropout=marian_config.activation_dropout,
        max_position_embeddings=marian_config.max_position_embeddings,
        position_embedding_type="sinusoidal",
        sinusoid_layout="halves",
        scale_embedding=marian_config.scale_embedding,
        share_encoder_decoder_embeddings=marian_config.share_encoder_decoder_embeddings,
        tie_word_embeddings=marian_config.tie_word_embeddings,
        output_bias=True,
        pad_token_id=marian_config.pad_token_id,
        bos_token_id=marian_config.bos_token_id,
        eos_token_id=marian_config.eos_token_id,
        decoder_start_token_id=marian_config.decoder_start_token_id,
        task=TranslationTask.name,
    )


def state_dict_from_marian(marian_state: dict[str, torch.Tensor], config: VanillaTransformerConfig) -> dict:
    """Marian's weights under this package's names; its position tables are checked and left out."""
    converted = {}
    for name, tensor in marian_state.items():
        if _POSITIONS.fullmatch(name):
            expected = sinusoidal_position_table(*tensor.shape, config.sinusoid_layout)
            if not torch.allclose(tensor.float(), expected, atol=1e-4):
                raise UsageError(
                    f"{name} is not the sinusoid table Marian builds; this checkpoint cannot be converted."
                )
            continue
        if name == "final_logits_bias":
            converted["lm_head.bias"] = tensor.reshape(-1)
            continue
        converted[_FEED_FORWARD.sub(r"\1mlp.\2", name)] = tensor
    return converted


def convert_marian_model(marian_model) -> VanillaTransformerForConditionalGeneration:
    """A `VanillaTransformerForConditionalGeneration` with a MarianMTModel's weights and generation config."""
    config = config_from_marian(marian_model.config)
    model = VanillaTransformerForConditionalGeneration(config)
    weights = state_dict_from_marian(marian_model.state_dict(), config)
    missing, unexpected = model.load_state_dict(weights, strict=False)
    tied = model.get_expanded_tied_weights_keys(all_submodels=True)
    missing = [name for name in missing if name not in tied and "embed_positions" not in name]
    if missing or unexpected:
        raise ValueError(f"Marian weights do not fit: missing {missing}, unexpected {unexpected}.")
    model.tie_weights()
    model.generation_config = marian_model.generation_config
    return model.eval()


def convert_marian(model_name_or_path: str | Path, output_dir: str | Path) -> Path:
    """Convert a MarianMTModel folder or Hub id (e.g. `Helsinki-NLP/opus-mt-de-en`, which needs the network)
    into a folder of this package: safetensors weights, config, the Marian tokenizer files (`AutoTokenizer`
    loads them; needs `sentencepiece`), the Marian model's own generation config (so `generate()` with no
    arguments decodes as it did), and the modeling and pipeline code for `trust_remote_code` loading."""
    from transformers import AutoConfig, AutoTokenizer, MarianMTModel

    from ...saving import (
        check_files_parse,
        check_hub_reachable,
        check_model_location,
        load_model,
        save_model_folder,
    )

    require("sentencepiece", "Importing a Marian model (its tokenizers)")

    if not Path(model_name_or_path).is_dir():
        if is_local_path(model_name_or_path):
            raise MissingPathError(
                f"No Marian model folder at {model_name_or_path}: pass a folder saved by "
                "MarianMTModel.save_pretrained or a Hub id such as Helsinki-NLP/opus-mt-de-en."
            )
        check_hub_reachable(str(model_name_or_path), "config.json")
    else:  # a folder without config.json (an empty one, say) is named, not sent to AutoConfig
        check_model_location(model_name_or_path)
    check_files_parse(model_name_or_path)  # a local folder's config or tokenizer file cut short is named
    config = AutoConfig.from_pretrained(model_name_or_path)
    if config.model_type != "marian":
        raise UsageError(
            f"{model_name_or_path} holds a {config.model_type!r} model (its config.json), not a Marian one: "
            "convert_marian expects a MarianMTModel folder or Hub id (model_type 'marian')."
        )
    marian = load_model(model_name_or_path, MarianMTModel)  # weights that do not read are named
    tokenizer = AutoTokenizer.from_pretrained(model_name_or_path)
    model = convert_marian_model(marian)
    # The languages a Marian tokenizer was made for (e.g. "de", "en"; a multilingual model's "mul" has no
    # sentence rules and is split at punctuation).
    languages = [getattr(tokenizer, "source_lang", None), getattr(tokenizer, "target_lang", None)]
    try:
        check_languages(languages)
        model.config.langs = languages
    except ValueError:  # a tokenizer that names no pair: nothing to record
        pass
    return save_model_folder(model, tokenizer, output_dir)
