"""Configuration of the encoder-decoder Transformer of "Attention Is All You Need" (Vaswani et al., 2017).

The defaults are the paper's base model (Table 3, row "base"); variants used by popular tutorials
(pre-LN, learned positions, untied vocabularies) are flags, not new classes.

This file imports only `transformers`, `huggingface_hub` (the `@strict` dataclass that transformers' own
configurations use), the standard library and `validation.py` (the rules a field keeps, which the command
line's options keep too), so that a saved model folder can carry it, and that file beside it, for
`trust_remote_code` loading.
"""

from typing import Any, ClassVar

from huggingface_hub.dataclasses import strict, validated_field
from transformers import PreTrainedConfig

from .validation import check_languages, check_task_name, integer_in, number_in, one_of, optional

POSITION_EMBEDDING_TYPES = ("sinusoidal", "learned")
INIT_METHODS = ("xavier", "fairseq")
SINUSOID_LAYOUTS = ("interleaved", "halves")

# Named presets: keyword overrides applied on top of the paper defaults.
# "transformer-base" / "transformer-big" are Table 3 of the paper. The small ones are sized to train
# on 2 CPU cores; "transformer-tiny" is for unit tests.
PRESETS: dict[str, dict[str, Any]] = {
    "transformer-base": {},
    "transformer-big": {
        "d_model": 1024,
        "encoder_ffn_dim": 4096,
        "decoder_ffn_dim": 4096,
        "encoder_attention_heads": 16,
        "decoder_attention_heads": 16,
        "dropout": 0.3,  # Table 3: P_drop 0.3 for "big" (0.1 for its EN-FR run)
    },
    "transformer-small": {
        "d_model": 256,
        "encoder_layers": 3,
        "decoder_layers": 3,
        "encoder_attention_heads": 8,
        "decoder_attention_heads": 8,
        "encoder_ffn_dim": 1024,
        "decoder_ffn_dim": 1024,
    },
    "transformer-mini": {
        "d_model": 128,
        "encoder_layers": 2,
        "decoder_layers": 2,
        "encoder_attention_heads": 4,
        "decoder_attention_heads": 4,
        "encoder_ffn_dim": 512,
        "decoder_ffn_dim": 512,
    },
    "transformer-tiny": {
        "d_model": 32,
        "encoder_layers": 2,
        "decoder_layers": 2,
        "encoder_attention_heads": 4,
        "decoder_attention_heads": 4,
        "encoder_ffn_dim": 64,
        "decoder_ffn_dim": 64,
        "max_position_embeddings": 256,
    },
}


_POSITIVE_INT = integer_in(">= 1")
_PROBABILITY = number_in("[0, 1)")


def _positive(default: int):
    return validated_field(_POSITIVE_INT, default=default)


def _probability_field(default: float):
    return validated_field(_PROBABILITY, default=default)


@strict
class VanillaTransformerConfig(PreTrainedConfig):
    r"""
    Configuration of [`VanillaTransformerModel`] / [`VanillaTransformerForConditionalGeneration`].

    Defaults reproduce the base model of Vaswani et al. (2017): d_model 512, 6 encoder and 6 decoder
    layers, 8 heads, d_ff 2048, ReLU, dropout 0.1 on sublayer outputs and on the sums of embeddings and
    positions (§5.4), post-LayerNorm residual blocks (§3.1), sinusoidal positions (§3.5), token
    embeddings scaled by sqrt(d_model) and one matrix shared by encoder input, decoder input and output
    projection (§3.4), label smoothing 0.1 (§5.4).

    Args:
        vocab_size: size of the (shared) vocabulary; the encoder's vocabulary when untied.
        decoder_vocab_size: size of the decoder's vocabulary; `None` means `vocab_size`. With
            `share_encoder_decoder_embeddings` there is one vocabulary: a model built from the configuration
            sets this to `vocab_size` (so that setting `vocab_size` alone, as resizing does, keeps one model).
        d_model: width of every sublayer output (d_model in the paper).
        encoder_layers / decoder_layers: N in the paper.
        encoder_attention_heads / decoder_attention_heads: h in the paper.
        encoder_ffn_dim / decoder_ffn_dim: inner width of the position-wise feed-forward network (d_ff).
        activation_function: activation of the feed-forward network (the paper: ReLU, eq. 2).
        dropout: P_drop, applied to every sublayer output and to embedding + position sums.
        attention_dropout: dropout on attention weights (not in the paper; 0 by default).
        activation_dropout: dropout after the feed-forward activation (not in the paper; 0 by default).
        max_position_embeddings: longest sequence the position table covers. Sinusoidal positions are a
            fixed table of this length; learned positions cannot go beyond it.
        position_embedding_type: `"sinusoidal"` (§3.5) or `"learned"` (as bentrevett's notebook and the
            series-expansion tutorial use).
        sinusoid_layout: where the sines and cosines of sinusoidal positions go: `"interleaved"`, as §3.5
            writes them (sin in even dimensions, cos in odd), or `"halves"`, all sines then all cosines, as
            Marian and fairseq lay them out (the same values, permuted).
        normalize_before: `False` is the paper's post-LN `LayerNorm(x + Sublayer(x))`; `True` is pre-LN
            `x + Sublayer(LayerNorm(x))` with a final LayerNorm after each stack.
        scale_embedding: multiply token embeddings by sqrt(d_model) (§3.4).
        share_encoder_decoder_embeddings: one embedding matrix for encoder and decoder inputs (§3.4).
        tie_word_embeddings: the output projection (`lm_head`) reuses the decoder input embedding (§3.4).
        output_bias: a bias on the output projection, added to the logits. The paper has none (§3.4); the
            series tutorial's output layer has one, and so do Marian checkpoints (`final_logits_bias`).
        label_smoothing: epsilon_ls used by the loss when `labels` are given (§5.4).
        layer_norm_eps: epsilon of every LayerNorm.
        init_std: standard deviation of embedding initialisation; `None` means d_model ** -0.5, so that
            scaled embeddings start with unit variance (as fairseq initialises this model).
        init_method: how a fresh model's linear layers start (the paper does not say). `"fairseq"` (the
            default), as fairseq's `transformer` initialises them: the query, key and value projections
            Xavier-uniform with gain 1/sqrt(2) and biases uniform in +-1/sqrt(fan_in), the feed-forward layers
            at torch's `nn.Linear` default (weights and biases uniform in +-1/sqrt(fan_in)), the rest as
            `"xavier"`: Xavier-uniform weights and zero biases everywhere. fairseq's residual branches start
            smaller, which lets the identity path of a post-LN model carry more early in training; it learned
            more per update on Multi30k (docs/experiments/multi30k.md). Only training from scratch reads it:
            loaded weights replace the initialisation.
        task: the registered name of the task the model was trained for (`hf_vanilla_transformer.tasks`,
            which a user's own tasks join): the package's tools (evaluation, the demo, attention plots) read
            it to refuse a model given for another task. `None` for a fresh model and for folders saved
            before it existed; training sets it.
        langs: a translation model's source and target language codes, e.g. `["de", "en"]` (as transformers'
            FSMT configuration names them); the pipeline splits a text into sentences by the source
            language's rules. `None` for other tasks and unknown languages; training and the Marian import set
            it.
        max_source_length / max_target_length: the longest source and target, in tokens counting `</s>`, the
            model was trained with (training's `--max_source_length` and `--max_target_length`: it saw no
            longer side). Decoding cuts a source to the smaller of `max_source_length` and
            `max_position_embeddings`. `None` (not recorded) for a fresh model, a converted one and folders
            saved before they existed, which are cut at their positions alone; training sets them.

    The generic transformers names are aliases (`attribute_map`), for reading and for building:
    `hidden_size` is `d_model`; `num_attention_heads` is `encoder_attention_heads` and `num_hidden_layers` is
    `encoder_layers`, the encoder's values only: the decoder keeps its own `decoder_attention_heads` and
    `decoder_layers` (8 and 6 by default), so `num_attention_heads=4` leaves the decoder with 8 heads. A field
    given both ways takes the alias's value, as in transformers' own configurations.

    The configuration is a `@strict` dataclass, as transformers' own are: each field is checked alone whenever
    it is set (`config.dropout = 1.5` raises `StrictDataclassFieldValidationError`), and how fields combine
    (`d_model` divisible by the head counts, one vocabulary when shared) is checked by
    `validate_architecture` at construction (`StrictDataclassClassValidationError`), when a model is built
    from the configuration and by
    `save_pretrained`, so that fields can be edited one at a time through states that do not fit together
    yet. Both errors name the values and the fix.
    """

    model_type: ClassVar[str] = "vanilla_transformer"
    # The Trainer leaves the decoder cache out of evaluation outputs: `cache` from transformers 5.24 on,
    # `past_key_values` before.
    keys_to_ignore_at_inference: ClassVar[list[str]] = ["cache", "past_key_values"]
    attribute_map: ClassVar[dict[str, str]] = {
        "hidden_size": "d_model",
        "num_attention_heads": "encoder_attention_heads",
        "num_hidden_layers": "encoder_layers",
    }

    vocab_size: int = _positive(37000)
    decoder_vocab_size: int | None = validated_field(optional(_POSITIVE_INT), default=None)
    d_model: int = _positive(512)
    encoder_layers: int = _positive(6)
    decoder_layers: int = _positive(6)
    encoder_attention_heads: int = _positive(8)
    decoder_attention_heads: int = _positive(8)
    encoder_ffn_dim: int = _positive(2048)
    decoder_ffn_dim: int = _positive(2048)
    activation_function: str = "relu"
    dropout: float | int = _probability_field(0.1)
    attention_dropout: float | int = _probability_field(0.0)
    activation_dropout: float | int = _probability_field(0.0)
    max_position_embeddings: int = _positive(1024)
    position_embedding_type: str = validated_field(one_of(*POSITION_EMBEDDING_TYPES), default="sinusoidal")
    sinusoid_layout: str = validated_field(one_of(*SINUSOID_LAYOUTS), default="interleaved")
    normalize_before: bool = False
    scale_embedding: bool = True
    share_encoder_decoder_embeddings: bool = True
    tie_word_embeddings: bool = True
    output_bias: bool = False
    label_smoothing: float | int = _probability_field(0.1)
    layer_norm_eps: float = 1e-5
    init_std: float | None = None
    init_method: str = validated_field(one_of(*INIT_METHODS), default="fairseq")
    task: str | None = validated_field(check_task_name, default=None)
    langs: list[str] | None = validated_field(check_languages, default=None)
    max_source_length: int | None = validated_field(optional(_POSITIVE_INT), default=None)
    max_target_length: int | None = validated_field(optional(_POSITIVE_INT), default=None)
    use_cache: bool = True
    is_encoder_decoder: bool = True
    # Special-token ids follow `hf_vanilla_transformer.tokenization`: <pad>=0, <s>=1, </s>=2, <unk>=3.
    pad_token_id: int | None = 0
    bos_token_id: int | None = 1
    eos_token_id: int | list[int] | None = 2
    decoder_start_token_id: int | None = 1

    def __post_init__(self, **kwargs):
        if self.decoder_vocab_size is None:
            self.decoder_vocab_size = self.vocab_size
        super().__post_init__(**kwargs)

    @classmethod
    def from_dict(cls, config_dict: dict[str, Any], **kwargs: Any):
        result = super().from_dict(config_dict, **kwargs)
        # `from_pretrained(..., hidden_size=64)` sets keyword overrides one by one after construction, each
        # checked alone: check how they combine once all are set.
        (result[0] if isinstance(result, tuple) else result).validate()
        return result

    def validate_architecture(self) -> None:
        """Part of `@strict`'s validation (at construction, `save_pretrained` and when a model is built):
        reject configurations that cannot build a working model, naming the values and the fix. Each field
        is checked alone as it is set; a value set by alias (`config.hidden_size = ...`) bypasses that check,
        so the aliased fields are checked here too."""
        for name in self.attribute_map.values():
            try:
                _POSITIVE_INT(getattr(self, name))
            except ValueError as error:
                raise ValueError(f"`{name}` {error}") from None
        for side in ("encoder", "decoder"):
            heads = getattr(self, f"{side}_attention_heads")
            if self.d_model % heads != 0:
                raise ValueError(
                    f"`d_model` ({self.d_model}) must be divisible by `{side}_attention_heads` ({heads}): "
                    "each head gets d_model / heads dimensions. Choose a head count that divides "
                    f"{self.d_model}."
                )
        if self.position_embedding_type == "sinusoidal" and self.d_model % 2 != 0:
            raise ValueError(f"Sinusoidal positions need an even `d_model`, got {self.d_model}.")
        if self.share_encoder_decoder_embeddings and self.decoder_vocab_size != self.vocab_size:
            raise ValueError(
                f"`share_encoder_decoder_embeddings=True` needs one vocabulary, but `vocab_size` is "
                f"{self.vocab_size} and `decoder_vocab_size` is {self.decoder_vocab_size}. Set "
                "`share_encoder_decoder_embeddings=False` for separate vocabularies, or make the sizes equal."
            )
        for name in ("pad_token_id", "bos_token_id", "decoder_start_token_id"):
            value = getattr(self, name)
            if value is not None and not 0 <= value < self.decoder_vocab_size:
                raise ValueError(
                    f"`{name}` ({value}) is outside the decoder vocabulary (size {self.decoder_vocab_size})."
                )

    @classmethod
    def from_preset(cls, name: str, **overrides: Any) -> "VanillaTransformerConfig":
        """Build a named preset (see `PRESETS`), with keyword overrides (e.g. `vocab_size=8000`)."""
        if name not in PRESETS:
            raise ValueError(f"Unknown preset {name!r}; available presets: {', '.join(PRESETS)}.")
        return cls(**{**PRESETS[name], **overrides})


__all__ = ["PRESETS", "VanillaTransformerConfig", "check_languages"]
