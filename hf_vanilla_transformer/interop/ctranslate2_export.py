"""Export a saved model folder to CTranslate2 (a C++ inference engine) for fast CPU/GPU deployment.

CTranslate2's generic Transformer spec covers this model exactly: post- or pre-LayerNorm, sinusoidal or
learned positions (we hand it our own table, so the paper's interleaved sin/cos layout is kept), embeddings
scaled by sqrt(d_model), one shared vocabulary. CTranslate2 ships converters for Marian and BART but not for a
custom model class, so the mapping below is ours; it reuses the weight-copying helpers of its BART loader.

    from hf_vanilla_transformer.interop.ctranslate2_export import convert_to_ctranslate2
    convert_to_ctranslate2(
        "outputs/multi30k-de-en/averaged", "outputs/ct2/multi30k-de-en-int8", quantization="int8"
    )

Run the exported folder with `hf_vanilla_transformer.interop.ctranslate2_inference.CTranslate2Seq2Seq`.
"""

from __future__ import annotations

import json
from pathlib import Path

from ctranslate2.converters.converter import Converter
from ctranslate2.converters.transformers import BartLoader
from ctranslate2.specs import common_spec, transformer_spec

from ..errors import ExistingPathError, UsageError
from ..modeling_vanilla_transformer import VanillaTransformerForConditionalGeneration
from ..outputs import check_not_a_file, check_not_an_input, mark_unfinished, staged
from ..saving import load_model
from ..tasks.registry import find_task
from ..tokenization import load_tokenizer
from .ctranslate2_inference import GENERATION_DEFAULTS_FILE, TASK_TRAITS

# transformers' names -> CTranslate2's; "swish" (x * sigmoid(x), OPUS-MT's) is "silu" under another name.
_ACTIVATIONS = {
    "relu": common_spec.Activation.RELU,
    "gelu": common_spec.Activation.GELU,
    "swish": common_spec.Activation.SWISH,
    "silu": common_spec.Activation.SWISH,
}


class _VanillaTransformerLoader(BartLoader):
    """Maps `VanillaTransformerForConditionalGeneration` onto `TransformerSpec` (BART's layout, our names)."""

    def get_model_spec(
        self, model: VanillaTransformerForConditionalGeneration
    ) -> transformer_spec.TransformerSpec:
        config = model.config
        if config.encoder_attention_heads != config.decoder_attention_heads:
            raise UsageError(
                "CTranslate2's TransformerSpec uses one head count for encoder and decoder, but this model "
                f"has {config.encoder_attention_heads} encoder and {config.decoder_attention_heads} decoder "
                "heads."
            )
        if config.activation_function not in _ACTIVATIONS:
            raise UsageError(
                f"Activation {config.activation_function!r} has no CTranslate2 equivalent here; "
                f"supported: {', '.join(_ACTIVATIONS)}."
            )
        spec = transformer_spec.TransformerSpec.from_config(
            (config.encoder_layers, config.decoder_layers),
            config.encoder_attention_heads,
            pre_norm=config.normalize_before,
            activation=_ACTIVATIONS[config.activation_function],
        )
        spec.config.layer_norm_epsilon = config.layer_norm_eps
        self.set_encoder(spec.encoder, model.model.encoder)
        self.set_decoder(spec.decoder, model.model.decoder)
        self.set_linear(spec.decoder.projection, model.lm_head)
        return spec

    def set_encoder(self, spec, encoder) -> None:
        self.set_common_layers(spec, encoder)
        for layer_spec, layer in zip(spec.layer, encoder.layers, strict=True):
            self.set_attention(layer_spec.self_attention, layer.self_attn, self_attention=True)
            self.set_layer_norm(layer_spec.self_attention.layer_norm, layer.self_attn_layer_norm)
            self._set_feed_forward(layer_spec.ffn, layer)

    def set_decoder(self, spec, decoder) -> None:
        self.set_common_layers(spec, decoder)
        for layer_spec, layer in zip(spec.layer, decoder.layers, strict=True):
            self.set_attention(layer_spec.self_attention, layer.self_attn, self_attention=True)
            self.set_layer_norm(layer_spec.self_attention.layer_norm, layer.self_attn_layer_norm)
            self.set_attention(layer_spec.attention, layer.encoder_attn, self_attention=False)
            self.set_layer_norm(layer_spec.attention.layer_norm, layer.encoder_attn_layer_norm)
            self._set_feed_forward(layer_spec.ffn, layer)

    def _set_feed_forward(self, spec, layer) -> None:
        self.set_linear(spec.linear_0, layer.mlp.fc1)
        self.set_linear(spec.linear_1, layer.mlp.fc2)
        self.set_layer_norm(spec.layer_norm, layer.final_layer_norm)

    def set_common_layers(self, spec, stack) -> None:
        spec.scale_embeddings = stack.embed_scale
        # Our table for both position types: the sinusoidal one is a buffer, interleaved as in §3.5.
        spec.position_encodings.encodings = stack.embed_positions.weight
        self.set_embeddings(
            spec.embeddings[0] if isinstance(spec.embeddings, list) else spec.embeddings, stack.embed_tokens
        )
        if stack.layer_norm is not None:  # pre-LN: the final LayerNorm of the stack
            self.set_layer_norm(spec.layer_norm, stack.layer_norm)

    def get_vocabulary(self, model, tokenizer) -> list[str]:
        by_id = {index: token for token, index in tokenizer.get_vocab().items()}
        size = model.config.vocab_size
        missing = [index for index in range(size) if index not in by_id]
        if missing or len(by_id) != size or not model.config.share_encoder_decoder_embeddings:
            raise UsageError(
                f"The export needs one shared vocabulary whose ids are exactly 0..{size - 1}; the tokenizer "
                f"has {len(by_id)} tokens (missing ids: {missing[:5]}), shared embeddings: "
                f"{model.config.share_encoder_decoder_embeddings}. Save the model with the tokenizer it was "
                "trained with."
            )
        return [by_id[index] for index in range(size)]

    def set_config(self, config, model, tokenizer) -> None:
        start = tokenizer.convert_ids_to_tokens(model.config.decoder_start_token_id)
        # Marian's tokenizers have no <s>: decoding starts from <pad> there, which CTranslate2 then also uses.
        config.bos_token = tokenizer.bos_token or start
        config.eos_token = tokenizer.eos_token
        config.unk_token = tokenizer.unk_token
        config.decoder_start_token = start


class VanillaTransformerConverter(Converter):
    """A CTranslate2 `Converter` for a folder saved by `save_model_folder` / `save_pretrained` + its
    tokenizer.

    Loading goes through `from_pretrained` (`saving.load_model`: a mistyped folder is named, not sent to the
    Hub, and so are weights that do not read), so weights are read from safetensors only.
    """

    def __init__(self, model_path: str | Path):
        self.model_path = str(model_path)
        self.model = load_model(self.model_path, VanillaTransformerForConditionalGeneration)
        config = self.model.config
        # The ids the model was trained with (a converted Marian model has its own).
        self.tokenizer = load_tokenizer(
            self.model_path, expected={"pad": config.pad_token_id, "eos": config.eos_token_id}
        )
        if not self.tokenizer.is_fast:
            # The export's generation side (ctranslate2_inference) reads tokenizer.json without transformers.
            raise UsageError(
                f"{self.model_path} has a {type(self.tokenizer).__name__}, not a fast tokenizer "
                "(tokenizer.json): the export needs one. For a model converted from Marian (OPUS-MT), "
                "CTranslate2 converts the original directly: `ct2-transformers-converter --model <Marian "
                "folder or Hub id> --output_dir <folder>`; it computes what the converted folder computes."
            )

    def _load(self):
        return _VanillaTransformerLoader()(self.model, self.tokenizer)


def convert_to_ctranslate2(
    model_path: str | Path, output_dir: str | Path, quantization: str | None = None, force: bool = False
) -> Path:
    """Convert the model folder `model_path` into a CTranslate2 model in `output_dir`.

    `quantization`: None keeps float32 weights; "int8", "int8_float32", "int8_float16", "int8_bfloat16",
    "int16", "float16", "bfloat16" are CTranslate2's weight types, checked by CTranslate2 (it can also convert
    at load time with `compute_type`). An existing `output_dir` is only replaced with `force=True`. The
    tokenizer and the model's decoding defaults are written next to the weights, so the folder is all
    `CTranslate2Seq2Seq` needs.
    """
    from ctranslate2.specs.model_spec import ACCEPTED_MODEL_TYPES

    # Checked before CTranslate2 is asked, which answers both with a traceback from inside its converter.
    if quantization is not None and quantization not in ACCEPTED_MODEL_TYPES:
        raise UsageError(
            f"Unknown quantization {quantization!r}; CTranslate2 accepts {', '.join(ACCEPTED_MODEL_TYPES)}."
        )
    check_not_a_file(output_dir)
    check_not_an_input(output_dir, {"model": str(model_path)})  # force or not: the model would be deleted
    if Path(output_dir).exists() and not force:
        raise ExistingPathError(
            f"{output_dir} exists: pass --overwrite to replace it, or choose another --output_dir."
        )
    converter = VanillaTransformerConverter(model_path)
    with staged(output_dir) as staging:
        # The staging folder is new: CTranslate2 writes into an existing folder only when forced, and then
        # makes it anew, without its mark.
        converter.convert(str(staging), quantization=quantization, force=True)
        mark_unfinished(staging)
        _write_beside(converter, staging)
    return Path(output_dir)


def _write_beside(converter, output_dir: Path) -> None:
    """The tokenizer and the decoding defaults, beside the converted weights."""
    converter.tokenizer.save_pretrained(output_dir)
    generation = converter.model.generation_config
    defaults = {
        "num_beams": generation.num_beams,
        "length_penalty": generation.length_penalty,
        "max_length": generation.max_length,
        "max_position_embeddings": converter.model.config.max_position_embeddings,
        # What the package's CTranslate2 backend cuts a source at, as generate()'s path does; None where the
        # model records none (a folder saved before it was recorded, a converted Marian model).
        "max_source_length": getattr(converter.model.config, "max_source_length", None),
        "langs": getattr(converter.model.config, "langs", None),  # the source's sentence rules
        "task": getattr(converter.model.config, "task", None),  # how long its outputs may run
    }
    task = find_task(defaults["task"])
    if task is not None:
        defaults[TASK_TRAITS] = {
            "name": task.name,
            "output_length_from_config": task.output_length_from_config,
            "splits_into_sentences": task.splits_into_sentences,
        }
    (output_dir / GENERATION_DEFAULTS_FILE).write_text(json.dumps(defaults, indent=2) + "\n")
