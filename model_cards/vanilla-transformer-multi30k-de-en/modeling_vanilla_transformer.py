"""The encoder-decoder Transformer of "Attention Is All You Need" (Vaswani et al., 2017) for transformers v5.

Bottom-up as `transformers/models/marian/modeling_marian.py`: positions, attention, feed-forward, the residual
sublayer, encoder and decoder layers, the pre-trained base class, the stacks, the bare model, the model with
its head. § numbers refer to the paper; docs/model.md holds the reasoning behind the less obvious choices.

It imports only `torch`, `transformers` (with `safetensors`) and its configuration, so that a saved folder can
carry it for `trust_remote_code` loading; what it uses beyond transformers' public API is in
docs/compatibility.md.
"""

import dataclasses
import functools
import glob
import math
import os
import warnings
from collections.abc import Callable

import torch
from safetensors import SafetensorError
from torch import nn
from transformers import initialization as init
from transformers.activations import ACT2FN
from transformers.cache_utils import Cache, DynamicCache, EncoderDecoderCache
from transformers.generation import GenerationMixin
from transformers.masking_utils import create_bidirectional_mask, create_causal_mask
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import (
    BaseModelOutput,
    BaseModelOutputWithPastAndCrossAttentions,
    Seq2SeqLMOutput,
    Seq2SeqModelOutput,
)
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS, PreTrainedModel
from transformers.utils import ModelOutput

from .configuration_vanilla_transformer import VanillaTransformerConfig

# --- The cache's old name ---------------------------------------------------------------------------------
# transformers 5.24 renamed the decoder cache `past_key_values` to `cache`; 5.23, the floor, has the old name.
# The model speaks `cache`; these three are the only code that knows the old name.

# The output field of the installed release, read once so that a compiled decoding step sees a constant.
CACHE_FIELD = (
    "cache" if "cache" in {field.name for field in dataclasses.fields(Seq2SeqLMOutput)} else "past_key_values"
)


def _output_with_cache(output_class: type[ModelOutput], cache: Cache | None, **fields) -> ModelOutput:
    """`output_class(cache=cache, **fields)` under either release."""
    return output_class(**fields, **{CACHE_FIELD: cache})


def accepts_past_key_values(forward: Callable) -> Callable:
    """Let a forward taking `cache` be called with `past_key_values`, as `generate()` calls it before 5.24;
    where the new name exists it warns, as transformers' own models do."""

    @functools.wraps(forward)
    def forward_taking_either_name(self, *args, past_key_values: Cache | None = None, **kwargs):
        if past_key_values is not None:
            if kwargs.get("cache") is not None:
                raise TypeError(
                    "Got both `cache` and `past_key_values`: they are one argument, named `cache` since "
                    "transformers 5.24 and `past_key_values` before. Pass only one of them."
                )
            if CACHE_FIELD == "cache" and not torch.compiler.is_compiling():
                warnings.warn(
                    "`past_key_values` is deprecated since transformers 5.24, which renamed it. "
                    "Use `cache` instead.",
                    FutureWarning,
                    stacklevel=2,
                )
            kwargs["cache"] = past_key_values
        return forward(self, *args, **kwargs)

    return forward_taking_either_name


def sinusoidal_position_table(num_positions: int, dim: int, layout: str = "interleaved") -> torch.Tensor:
    """§3.5: PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model)).

    `layout="interleaved"` is the paper's order; `"halves"` (all sines, then all cosines) is Marian's and
    fairseq's, so that their checkpoints compute here what they computed there.
    """
    position = torch.arange(num_positions, dtype=torch.float32).unsqueeze(1)  # (P, 1)
    inv_freq = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))  # (d/2,)
    sines, cosines = torch.sin(position * inv_freq), torch.cos(position * inv_freq)  # (P, d/2) each
    if layout == "halves":
        return torch.cat([sines, cosines], dim=1)
    table = torch.zeros(num_positions, dim)
    table[:, 0::2] = sines
    table[:, 1::2] = cosines
    return table


class VanillaTransformerPositionalEmbedding(nn.Module):
    """Position embeddings added to the scaled token embeddings: the fixed sinusoids of §3.5, or learned."""

    def __init__(self, num_positions: int, dim: int, learned: bool, layout: str = "interleaved"):
        super().__init__()
        self.num_positions = num_positions
        self.learned = learned
        self.layout = layout
        if learned:
            self.weight = nn.Parameter(torch.empty(num_positions, dim))
        else:
            # Never saved: `_init_weights` refills it, as models are built on the meta device.
            table = sinusoidal_position_table(num_positions, dim, layout)
            self.register_buffer("weight", table, persistent=False)

    def forward(self, seq_len: int, past_length: int | torch.Tensor = 0) -> torch.Tensor:
        """Positions `past_length .. past_length + seq_len - 1`; `past_length` is a 0-dim tensor under a
        static cache, indexed rather than sliced so that `torch.compile` traces one graph for every step."""
        # A static cache's length is a tensor, not read here: the decoder checks that cache's size instead.
        if isinstance(past_length, int):
            end = past_length + seq_len
            if end > self.num_positions:
                raise ValueError(
                    f"Sequence of {end} positions is longer than the model allows (max_position_embeddings="
                    f"{self.num_positions}). Shorten or truncate the input (e.g. tokenizer(..., "
                    f"truncation=True, max_length={self.num_positions})) or lower `max_new_tokens`"
                    + (
                        "; sinusoidal positions have no weights, so you can also load the model with a "
                        "larger `max_position_embeddings`."
                        if not self.learned
                        else "; learned positions cannot be extended without training."
                    )
                )
        positions = torch.arange(seq_len, device=self.weight.device) + past_length
        return self.weight[positions]  # (T, d_model)


# Adapted from transformers.models.bert.modeling_bert.eager_attention_forward (which Marian copies): a copy,
# since a saved folder's code imports only transformers' public API; it adds a causal mask where none is
# given, takes SDPA's boolean masks, and runs the softmax in float32.
def eager_attention_forward(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float,
    dropout: float = 0.0,
    is_causal: bool = False,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product attention, eq. 1: softmax(Q K^T / sqrt(d_k)) V.

    `attention_mask` is additive, the dtype's minimum where masked (`transformers.masking_utils`), so no
    constant such as -1e9 overflows in half precision.
    """
    attn_weights = torch.matmul(query, key.transpose(2, 3)) * scaling  # (B, h, Tq, Tk)
    q_len, kv_len = query.shape[2], key.shape[2]
    if attention_mask is None and is_causal and q_len > 1:
        # The mask helpers leave an all-causal mask to SDPA, and this kernel also serves SDPA models asked for
        # attention weights.
        attention_mask = torch.ones(q_len, kv_len, dtype=torch.bool, device=query.device).tril(kv_len - q_len)
    if attention_mask is not None and attention_mask.dtype == torch.bool:
        # An SDPA-style mask (True = attend), met when attention weights are requested under SDPA.
        attention_mask = torch.zeros_like(attention_mask, dtype=attn_weights.dtype).masked_fill(
            ~attention_mask, torch.finfo(attn_weights.dtype).min
        )
    if attention_mask is not None:
        attn_weights = attn_weights + attention_mask
    attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query.dtype)
    attn_weights = nn.functional.dropout(attn_weights, p=dropout, training=module.training)
    attn_output = torch.matmul(attn_weights, value)  # (B, h, Tq, d_k)
    return attn_output.transpose(1, 2).contiguous(), attn_weights  # (B, Tq, h, d_k)


class VanillaTransformerAttention(nn.Module):
    """Multi-head attention, §3.2.2: MultiHead(Q, K, V) = Concat(head_1..head_h) W^O.

    Used three ways (§3.2.3): encoder self-attention, masked decoder self-attention (`is_causal`), and
    encoder-decoder attention (`key_value_states` given), whose keys and values are cached once per sequence.
    """

    def __init__(
        self,
        config: VanillaTransformerConfig,
        num_heads: int,
        is_causal: bool = False,
        layer_idx: int | None = None,
    ):
        super().__init__()
        self.config = config
        self.embed_dim = config.d_model
        self.num_heads = num_heads
        self.head_dim = self.embed_dim // num_heads
        self.scaling = self.head_dim**-0.5
        self.dropout = config.attention_dropout
        self.is_causal = is_causal
        self.layer_idx = layer_idx

        self.q_proj = nn.Linear(self.embed_dim, self.embed_dim)
        self.k_proj = nn.Linear(self.embed_dim, self.embed_dim)
        self.v_proj = nn.Linear(self.embed_dim, self.embed_dim)
        self.out_proj = nn.Linear(self.embed_dim, self.embed_dim)
        for projection in (self.q_proj, self.k_proj, self.v_proj):
            projection.init_role = "qkv"  # read by `_init_weights` under `config.init_method="fairseq"`

    def forward(
        self,
        hidden_states: torch.Tensor,
        key_value_states: torch.Tensor | None = None,
        cache: Cache | None = None,
        attention_mask: torch.Tensor | None = None,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        is_cross_attention = key_value_states is not None
        input_shape = hidden_states.shape[:-1]  # (B, Tq)
        query_states = self.q_proj(hidden_states).view(*input_shape, -1, self.head_dim).transpose(1, 2)

        layer_cache = cache
        if isinstance(cache, EncoderDecoderCache):
            layer_cache = cache.cross_attention_cache if is_cross_attention else cache.self_attention_cache

        # No public call reads a layer's cached keys without appending to them; Marian reads these too.
        cross_is_cached = (
            is_cross_attention
            and isinstance(cache, EncoderDecoderCache)
            and cache.is_updated.get(self.layer_idx, False)
        )
        if cross_is_cached:
            # The encoder output does not change during generation: reuse its projections.
            key_states = layer_cache.layers[self.layer_idx].keys
            value_states = layer_cache.layers[self.layer_idx].values
        else:
            current_states = key_value_states if is_cross_attention else hidden_states
            kv_shape = (*current_states.shape[:-1], -1, self.head_dim)
            key_states = self.k_proj(current_states).view(kv_shape).transpose(1, 2)  # (B, h, Tk, d_k)
            value_states = self.v_proj(current_states).view(kv_shape).transpose(1, 2)
            if layer_cache is not None:
                key_states, value_states = layer_cache.update(key_states, value_states, self.layer_idx)
                if is_cross_attention and isinstance(cache, EncoderDecoderCache):
                    cache.is_updated[self.layer_idx] = True

        # Attention weights can only be returned by the eager kernel; use it for calls that ask for them. A
        # decoding step on the CPU (a query of one token) takes it too: there SDPA's fused CPU kernel costs
        # about twice the two small matrix products and the softmax it fuses (docs/benchmarks.md).
        one_token_on_cpu = input_shape[1] == 1 and query_states.device.type == "cpu"
        attention_interface: Callable = (
            eager_attention_forward
            if output_attentions or (one_token_on_cpu and self.config._attn_implementation == "sdpa")
            else ALL_ATTENTION_FUNCTIONS.get_interface(
                self.config._attn_implementation, eager_attention_forward
            )
        )
        attn_output, attn_weights = attention_interface(
            self,
            query_states,
            key_states,
            value_states,
            attention_mask,
            dropout=self.dropout if self.training else 0.0,
            scaling=self.scaling,
            is_causal=self.is_causal,
        )
        attn_output = self.out_proj(attn_output.reshape(*input_shape, -1))  # (B, Tq, d_model)
        return attn_output, (attn_weights if output_attentions else None)


class VanillaTransformerFeedForward(nn.Module):
    """Position-wise feed-forward network, §3.3 eq. 2: FFN(x) = max(0, x W1 + b1) W2 + b2."""

    def __init__(self, config: VanillaTransformerConfig, ffn_dim: int):
        super().__init__()
        self.fc1 = nn.Linear(config.d_model, ffn_dim)
        self.fc2 = nn.Linear(ffn_dim, config.d_model)
        self.fc1.init_role = self.fc2.init_role = "ffn"  # read by `_init_weights`, as in the attention
        self.activation_fn = ACT2FN[config.activation_function]
        self.activation_dropout = config.activation_dropout

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        hidden_states = self.activation_fn(self.fc1(hidden_states))
        hidden_states = nn.functional.dropout(
            hidden_states, p=self.activation_dropout, training=self.training
        )
        return self.fc2(hidden_states)


class VanillaTransformerResidualLayer(GradientCheckpointingLayer):
    """Residual sublayers with dropout on their output (§3.1, §5.4): post-LN as in the paper,
    LayerNorm(x + Dropout(Sublayer(x))), or pre-LN (`normalize_before`), x + Dropout(Sublayer(LayerNorm(x))).
    Both use the same LayerNorm modules, so a checkpoint has the same keys either way."""

    def __init__(self, config: VanillaTransformerConfig):
        super().__init__()
        self.normalize_before = config.normalize_before
        self.dropout = config.dropout

    def residual(
        self,
        hidden_states: torch.Tensor,
        layer_norm: nn.LayerNorm,
        sublayer: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor | None]],
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """One residual sublayer around `sublayer`, which returns its output and its attention weights (or
        `None`); returns the new hidden states and those weights."""
        output, weights = sublayer(layer_norm(hidden_states) if self.normalize_before else hidden_states)
        hidden_states = hidden_states + nn.functional.dropout(output, p=self.dropout, training=self.training)
        return (hidden_states if self.normalize_before else layer_norm(hidden_states)), weights


class VanillaTransformerEncoderLayer(VanillaTransformerResidualLayer):
    """Encoder layer, §3.1: self-attention, then the feed-forward network, each a residual sublayer."""

    def __init__(self, config: VanillaTransformerConfig, layer_idx: int | None = None):
        super().__init__(config)
        self.self_attn = VanillaTransformerAttention(
            config, config.encoder_attention_heads, layer_idx=layer_idx
        )
        self.self_attn_layer_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.mlp = VanillaTransformerFeedForward(config, config.encoder_ffn_dim)
        self.final_layer_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        hidden_states, attn_weights = self.residual(
            hidden_states,
            self.self_attn_layer_norm,
            lambda x: self.self_attn(x, attention_mask=attention_mask, output_attentions=output_attentions),
        )
        hidden_states, _ = self.residual(hidden_states, self.final_layer_norm, lambda x: (self.mlp(x), None))
        return hidden_states, attn_weights  # (B, T, d_model)


class VanillaTransformerDecoderLayer(VanillaTransformerResidualLayer):
    """Decoder layer, §3.1: masked self-attention, encoder-decoder attention (skipped without
    `encoder_hidden_states`, as in Marian), then the feed-forward network, each a residual sublayer."""

    def __init__(self, config: VanillaTransformerConfig, layer_idx: int | None = None):
        super().__init__(config)
        self.self_attn = VanillaTransformerAttention(
            config, config.decoder_attention_heads, is_causal=True, layer_idx=layer_idx
        )
        self.self_attn_layer_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.encoder_attn = VanillaTransformerAttention(
            config, config.decoder_attention_heads, layer_idx=layer_idx
        )
        self.encoder_attn_layer_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.mlp = VanillaTransformerFeedForward(config, config.decoder_ffn_dim)
        self.final_layer_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None,
        encoder_hidden_states: torch.Tensor | None = None,
        encoder_attention_mask: torch.Tensor | None = None,
        cache: Cache | None = None,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        hidden_states, self_attn_weights = self.residual(
            hidden_states,
            self.self_attn_layer_norm,
            lambda x: self.self_attn(
                x, cache=cache, attention_mask=attention_mask, output_attentions=output_attentions
            ),
        )
        cross_attn_weights = None
        if encoder_hidden_states is not None:
            # Queries from the decoder, keys and values from the encoder output (§3.2.3).
            hidden_states, cross_attn_weights = self.residual(
                hidden_states,
                self.encoder_attn_layer_norm,
                lambda x: self.encoder_attn(
                    x,
                    key_value_states=encoder_hidden_states,
                    cache=cache,
                    attention_mask=encoder_attention_mask,
                    output_attentions=output_attentions,
                ),
            )
        hidden_states, _ = self.residual(hidden_states, self.final_layer_norm, lambda x: (self.mlp(x), None))
        return hidden_states, self_attn_weights, cross_attn_weights  # (B, T, d_model), weights


class VanillaTransformerPreTrainedModel(PreTrainedModel):
    config: VanillaTransformerConfig
    config_class = VanillaTransformerConfig
    base_model_prefix = "model"
    supports_gradient_checkpointing = True
    _no_split_modules = ["VanillaTransformerEncoderLayer", "VanillaTransformerDecoderLayer"]
    _supports_sdpa = True
    _supports_flash_attn = False
    _supports_flex_attn = False
    # `device_map` must not move the cache between layers; before 5.24 it is passed as `past_key_values`.
    _skip_keys_device_placement = ["cache", "past_key_values"]
    # A decoding step traces to one graph, so generate(cache_implementation="static") can compile it.
    _can_compile_fullgraph = True

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        """N(0, d_model^-0.5) embeddings, as fairseq's (the paper does not say): unit variance once scaled by
        sqrt(d_model) (§3.4). Linear layers follow `config.init_method`."""
        embed_std = self.config.init_std if self.config.init_std is not None else self.config.d_model**-0.5
        # A role set where built: for remote code, transformers skips modules owning no parameters directly.
        role = getattr(module, "init_role", None) if self.config.init_method == "fairseq" else None
        if isinstance(module, nn.Linear) and role is not None:
            bound = module.in_features**-0.5  # torch's nn.Linear default bound, for fairseq's biases
            if role == "qkv":
                init.xavier_uniform_(module.weight, gain=2**-0.5)
            else:  # "ffn": torch's nn.Linear default for the weight too
                init.uniform_(module.weight, -bound, bound)
            init.uniform_(module.bias, -bound, bound)
        elif isinstance(module, nn.Linear):
            init.xavier_uniform_(module.weight)
            if module.bias is not None:
                init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            init.normal_(module.weight, mean=0.0, std=embed_std)
            # As in transformers' own: a loaded weight (`_is_hf_initialized`) keeps its padding row.
            if module.padding_idx is not None and not getattr(module.weight, "_is_hf_initialized", False):
                module.weight[module.padding_idx].zero_()
        elif isinstance(module, nn.LayerNorm):
            init.ones_(module.weight)
            init.zeros_(module.bias)
        elif isinstance(module, VanillaTransformerPositionalEmbedding):
            if module.learned:
                init.normal_(module.weight, mean=0.0, std=embed_std)
            else:
                init.copy_(module.weight, sinusoidal_position_table(*module.weight.shape, module.layout))

    # Building and loading: the configuration checked before sizing, readable load errors, module ties.

    def __init__(self, config: VanillaTransformerConfig, *inputs, **kwargs):
        # One shared vocabulary has one size, as in Marian: common tests and resizing set `vocab_size` alone.
        if config.share_encoder_decoder_embeddings:
            config.decoder_vocab_size = config.vocab_size
        # Fields set after construction are checked alone; here how they combine, before any layer is sized.
        config.validate()
        super().__init__(config, *inputs, **kwargs)

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *model_args, **kwargs):
        try:
            return super().from_pretrained(pretrained_model_name_or_path, *model_args, **kwargs)
        except SafetensorError as error:
            # safetensors' own message ("Error while deserializing header") names neither file nor remedy.
            location = str(pretrained_model_name_or_path)
            files = sorted(glob.glob(os.path.join(glob.escape(location), "*.safetensors")))
            which = files[0] if len(files) == 1 else "a .safetensors file there"
            raise UnreadableWeightsError(
                f"Could not read the weights of {location}: {which} is truncated or corrupt ({error}). "
                "Download or save the model again; nothing was loaded."
            ) from error

    def tie_weights(self, *args, **kwargs):
        """transformers' tying, then the stacks' `embed_tokens` become the `shared` module itself, for FSDP2
        (docs/model.md)."""
        super().tie_weights(*args, **kwargs)
        for module in self.modules():
            if isinstance(module, VanillaTransformerModel):
                module.share_embedding_module()


class _VanillaTransformerStack(VanillaTransformerPreTrainedModel):
    """What encoder and decoder share: token embeddings (tied to the bare model's `shared` when the vocabulary
    is, §3.4), positions, the layers, and the final LayerNorm that pre-LN needs."""

    # What the top-level model calls this stack's inputs, for the messages that refuse them.
    ids_name = "input_ids"
    embeds_name = "inputs_embeds"

    def __init__(
        self, config: VanillaTransformerConfig, vocab_size: int, layer_class: type[nn.Module], num_layers: int
    ):
        super().__init__(config)
        self.dropout = config.dropout
        self.embed_scale = math.sqrt(config.d_model) if config.scale_embedding else 1.0
        self.embed_tokens = nn.Embedding(vocab_size, config.d_model, config.pad_token_id)
        self.embed_positions = VanillaTransformerPositionalEmbedding(
            config.max_position_embeddings,
            config.d_model,
            learned=config.position_embedding_type == "learned",
            layout=config.sinusoid_layout,
        )
        self.layers = nn.ModuleList([layer_class(config, layer_idx=i) for i in range(num_layers)])
        self.layer_norm = (
            nn.LayerNorm(config.d_model, eps=config.layer_norm_eps) if config.normalize_before else None
        )
        self.gradient_checkpointing = False
        self.post_init()

    def embed(
        self,
        input_ids: torch.Tensor | None,
        inputs_embeds: torch.Tensor | None,
        past_length: int | torch.Tensor = 0,
    ) -> torch.Tensor:
        """§3.4-3.5: token embedding × sqrt(d_model) + position encoding, then dropout (§5.4)."""
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError(f"Pass exactly one of `{self.ids_name}` and `{self.embeds_name}`.")
        if inputs_embeds is None:
            _check_token_ids(input_ids, self.ids_name)
            inputs_embeds = self.embed_tokens(input_ids)
        positions = self.embed_positions(inputs_embeds.shape[1], past_length).to(inputs_embeds.dtype)
        hidden_states = inputs_embeds * self.embed_scale + positions
        return nn.functional.dropout(hidden_states, p=self.dropout, training=self.training)  # (B, T, d_model)

    def _output_flags(
        self, output_attentions: bool | None, output_hidden_states: bool | None
    ) -> tuple[bool, bool]:
        return (
            output_attentions if output_attentions is not None else self.config.output_attentions,
            output_hidden_states if output_hidden_states is not None else self.config.output_hidden_states,
        )


class VanillaTransformerEncoder(_VanillaTransformerStack):
    """A stack of `config.encoder_layers` encoder layers (§3.1), over embedded source tokens."""

    def __init__(self, config: VanillaTransformerConfig):
        super().__init__(config, config.vocab_size, VanillaTransformerEncoderLayer, config.encoder_layers)

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
    ) -> BaseModelOutput:
        r"""
        Args:
            input_ids (`torch.LongTensor` of shape `(batch_size, src_len)`): source token ids.
            attention_mask (`torch.Tensor` of shape `(batch_size, src_len)`): 1 for a token, 0 for padding.
            inputs_embeds (`torch.Tensor` of shape `(batch_size, src_len, d_model)`): token embeddings
                to use instead of `input_ids` (exactly one of the two).
            output_attentions (`bool`): return every layer's attention weights (default: the config's).
            output_hidden_states (`bool`): return every layer's hidden states (default: the config's).
            return_dict (`bool`): `False` for a tuple, not [`BaseModelOutput`].
        """
        output_attentions, output_hidden_states = self._output_flags(output_attentions, output_hidden_states)
        hidden_states = self.embed(input_ids, inputs_embeds)
        _check_attention_mask(attention_mask, hidden_states.shape[:2], self.ids_name)
        # In training a padding mask is used without a look at its content: transformers drops one that masks
        # nothing (so that SDPA may take its flash kernel) after reading it back to the host, a wait for the
        # device in every step, and training batches are padded all but always. No mask is still no mask.
        attention_mask = create_bidirectional_mask(
            config=self.config,
            inputs_embeds=hidden_states,
            attention_mask=attention_mask,
            allow_is_bidirectional_skip=not self.training or attention_mask is None,
        )
        all_hidden_states = () if output_hidden_states else None
        all_attentions = () if output_attentions else None
        for layer in self.layers:
            if output_hidden_states:
                all_hidden_states += (hidden_states,)
            hidden_states, attn_weights = layer(
                hidden_states, attention_mask, output_attentions=output_attentions
            )
            if output_attentions:
                all_attentions += (attn_weights,)
        if self.layer_norm is not None:
            hidden_states = self.layer_norm(hidden_states)
        if output_hidden_states:
            all_hidden_states += (hidden_states,)
        output = BaseModelOutput(
            last_hidden_state=hidden_states, hidden_states=all_hidden_states, attentions=all_attentions
        )
        return output if return_dict is not False else output.to_tuple()


class VanillaTransformerDecoder(_VanillaTransformerStack):
    """A stack of `config.decoder_layers` decoder layers (§3.1) over embedded, right-shifted target tokens;
    without `encoder_hidden_states` it runs alone, a causal language model, as Marian's decoder does."""

    ids_name = "decoder_input_ids"
    embeds_name = "decoder_inputs_embeds"

    def __init__(self, config: VanillaTransformerConfig):
        super().__init__(
            config, config.decoder_vocab_size, VanillaTransformerDecoderLayer, config.decoder_layers
        )

    @accepts_past_key_values
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        encoder_hidden_states: torch.Tensor | None = None,
        encoder_attention_mask: torch.Tensor | None = None,
        cache: Cache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
    ) -> BaseModelOutputWithPastAndCrossAttentions:
        r"""
        Args:
            input_ids (`torch.LongTensor` of shape `(batch_size, tgt_len)`): right-shifted target ids;
                with `cache`, only those not yet in it.
            attention_mask (`torch.Tensor` of shape `(batch_size, tgt_len)`): 1 for a token, 0 for padding.
            encoder_hidden_states (`torch.Tensor` of shape `(batch_size, src_len, d_model)`): the
                encoder's output; without it the encoder-decoder attention is skipped.
            encoder_attention_mask (`torch.Tensor` of shape `(batch_size, src_len)`): the source's mask, 1 for
                a token, 0 for padding.
            cache ([`EncoderDecoderCache`]): keys and values of earlier steps; one is made when `use_cache`.
            inputs_embeds (`torch.Tensor` of shape `(batch_size, tgt_len, d_model)`): token embeddings
                to use instead of `input_ids` (exactly one of the two).
            use_cache (`bool`): return the cache for the next step (default: the config's).
            output_attentions (`bool`): return every layer's attention weights (default: the config's).
            output_hidden_states (`bool`): return every layer's hidden states (default: the config's).
            return_dict (`bool`): `False` for a tuple, not [`BaseModelOutputWithPastAndCrossAttentions`].
        """
        output_attentions, output_hidden_states = self._output_flags(output_attentions, output_hidden_states)
        use_cache = use_cache if use_cache is not None else self.config.use_cache
        if self.gradient_checkpointing and self.training and use_cache:
            use_cache = False  # the backward replay would write the cache a second time
        if use_cache and cache is None:
            cache = EncoderDecoderCache(DynamicCache(config=self.config), DynamicCache(config=self.config))

        past_length = cache.get_seq_length() if cache is not None else 0
        if cache is not None and cache.is_compileable:
            # A static cache's length is a tensor the positions do not read: check its allocated size instead.
            capacity = cache.get_max_length()
            if capacity > self.config.max_position_embeddings:
                raise ValueError(
                    f"The static cache holds {capacity} decoder positions, more than the model allows "
                    f"(max_position_embeddings={self.config.max_position_embeddings}). Lower "
                    f"`max_new_tokens` or `max_length` to at most {self.config.max_position_embeddings}."
                )
        hidden_states = self.embed(input_ids, inputs_embeds, past_length)
        self_attn_cache = cache.self_attention_cache if isinstance(cache, EncoderDecoderCache) else cache
        # The cache goes by position: this keyword too was renamed in transformers 5.24. Without a cache the
        # positions would only be searched for packed sequences (a host read of the device's result), and
        # these never are.
        positions = None
        if self_attn_cache is not None:
            positions = torch.arange(hidden_states.shape[1], device=hidden_states.device) + past_length
            positions = positions.unsqueeze(0)
        causal_mask = create_causal_mask(
            self.config,
            hidden_states,
            attention_mask,
            self_attn_cache,
            position_ids=positions,
            # As the encoder's mask. Without a padding mask (a training batch's decoder inputs) the causal
            # mask is dropped for SDPA's is_causal without a read.
            allow_is_causal_skip=not self.training or attention_mask is None,
        )
        if encoder_hidden_states is not None:
            encoder_attention_mask = create_bidirectional_mask(
                config=self.config,
                inputs_embeds=hidden_states,
                attention_mask=encoder_attention_mask,
                encoder_hidden_states=encoder_hidden_states,
                allow_is_bidirectional_skip=not self.training or encoder_attention_mask is None,
            )

        all_hidden_states = () if output_hidden_states else None
        all_self_attns = () if output_attentions else None
        all_cross_attns = () if output_attentions and encoder_hidden_states is not None else None
        for layer in self.layers:
            if output_hidden_states:
                all_hidden_states += (hidden_states,)
            hidden_states, self_attn_weights, cross_attn_weights = layer(
                hidden_states,
                causal_mask,
                encoder_hidden_states,  # positional, so gradient checkpointing sees it
                encoder_attention_mask=encoder_attention_mask,
                cache=cache if use_cache else None,
                output_attentions=output_attentions,
            )
            if output_attentions:
                all_self_attns += (self_attn_weights,)
            if all_cross_attns is not None:
                all_cross_attns += (cross_attn_weights,)
        if self.layer_norm is not None:
            hidden_states = self.layer_norm(hidden_states)
        if output_hidden_states:
            all_hidden_states += (hidden_states,)
        output = _output_with_cache(
            BaseModelOutputWithPastAndCrossAttentions,
            cache if use_cache else None,
            last_hidden_state=hidden_states,
            hidden_states=all_hidden_states,
            attentions=all_self_attns,
            cross_attentions=all_cross_attns,
        )
        return output if return_dict is not False else output.to_tuple()


class VanillaTransformerModel(VanillaTransformerPreTrainedModel):
    """The bare encoder-decoder (§3.1, Figure 1) returning the decoder's last hidden states."""

    def __init__(self, config: VanillaTransformerConfig):
        super().__init__(config)
        if config.share_encoder_decoder_embeddings:
            # §3.4: one embedding matrix for both stacks, tied as Marian ties it (docs/model.md).
            self.shared = nn.Embedding(config.vocab_size, config.d_model, config.pad_token_id)
            self._tied_weights_keys = {
                "encoder.embed_tokens.weight": "shared.weight",
                "decoder.embed_tokens.weight": "shared.weight",
            }
        self.encoder = VanillaTransformerEncoder(config)
        self.decoder = VanillaTransformerDecoder(config)
        self.post_init()

    @accepts_past_key_values
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.LongTensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs: tuple[torch.Tensor] | BaseModelOutput | None = None,
        cache: Cache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        decoder_inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **kwargs,
    ) -> Seq2SeqModelOutput:
        r"""
        Args:
            input_ids (`torch.LongTensor` of shape `(batch_size, src_len)`): source token ids.
            attention_mask (`torch.Tensor` of shape `(batch_size, src_len)`): 1 for a token, 0 for padding.
            decoder_input_ids (`torch.LongTensor` of shape `(batch_size, tgt_len)`): target ids shifted right
                behind `config.decoder_start_token_id` (`shift_tokens_right`); with `cache`, only new ones.
            decoder_attention_mask (`torch.Tensor` of shape `(batch_size, tgt_len)`): target padding mask.
            encoder_outputs ([`BaseModelOutput`] or `tuple`): the encoder's output, to skip running it again.
            cache ([`EncoderDecoderCache`]): the decoder's keys and values from earlier steps.
            inputs_embeds (`torch.Tensor` of shape `(batch_size, src_len, d_model)`): instead of `input_ids`.
            decoder_inputs_embeds (`torch.Tensor` of shape `(batch_size, tgt_len, d_model)`): instead of
                `decoder_input_ids`.
            use_cache (`bool`): return the cache for the next step (default: the config's).
            output_attentions (`bool`): return every layer's attention weights (default: the config's).
            output_hidden_states (`bool`): return every layer's hidden states (default: the config's).
            return_dict (`bool`): `False` for a tuple, not [`Seq2SeqModelOutput`].
            kwargs: none is read; any is an error, so that an argument transformers renames fails loudly.
        """
        _reject_unused(kwargs, f"{type(self).__name__}.forward()")
        if encoder_outputs is None:
            encoder_outputs = self.encoder(
                input_ids=input_ids,
                attention_mask=attention_mask,
                inputs_embeds=inputs_embeds,
                output_attentions=output_attentions,
                output_hidden_states=output_hidden_states,
            )
        elif not isinstance(encoder_outputs, BaseModelOutput):
            encoder_outputs = BaseModelOutput(
                last_hidden_state=encoder_outputs[0],
                hidden_states=encoder_outputs[1] if len(encoder_outputs) > 1 else None,
                attentions=encoder_outputs[2] if len(encoder_outputs) > 2 else None,
            )
        target = decoder_input_ids if decoder_input_ids is not None else decoder_inputs_embeds
        sources = encoder_outputs.last_hidden_state.shape[0]
        if target is not None and target.shape[0] != sources:
            # Cross-attention would fail on the shapes, or broadcast one row over every source.
            raise ValueError(
                f"The decoder's input (decoder_input_ids, or labels shifted right) has {target.shape[0]} "
                f"rows but the source (input_ids) has {sources}: give one target sequence per source."
            )
        decoder_outputs = self.decoder(
            input_ids=decoder_input_ids,
            attention_mask=decoder_attention_mask,
            encoder_hidden_states=encoder_outputs.last_hidden_state,
            encoder_attention_mask=attention_mask,
            cache=cache,
            inputs_embeds=decoder_inputs_embeds,
            use_cache=use_cache,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
        )
        output = _output_with_cache(
            Seq2SeqModelOutput,
            getattr(decoder_outputs, CACHE_FIELD),
            last_hidden_state=decoder_outputs.last_hidden_state,
            decoder_hidden_states=decoder_outputs.hidden_states,
            decoder_attentions=decoder_outputs.attentions,
            cross_attentions=decoder_outputs.cross_attentions,
            encoder_last_hidden_state=encoder_outputs.last_hidden_state,
            encoder_hidden_states=encoder_outputs.hidden_states,
            encoder_attentions=encoder_outputs.attentions,
        )
        return output if return_dict is not False else output.to_tuple()

    # Embeddings as transformers reaches them: weight ties, access and resizing.

    def get_expanded_tied_weights_keys(self, all_submodels: bool = False) -> dict[str, str]:
        """The stacks share embeddings by `share_encoder_decoder_embeddings` alone, whatever
        `tie_word_embeddings` says of `lm_head` (docs/model.md)."""
        if all_submodels or not self.config.share_encoder_decoder_embeddings:
            return super().get_expanded_tied_weights_keys(all_submodels)
        return dict(self._tied_weights_keys)

    def share_embedding_module(self) -> None:
        """Make the stacks' `embed_tokens` the `shared` module once their weights are its Parameter
        (`tie_weights` says why)."""
        if not self.config.share_encoder_decoder_embeddings:
            return
        stacks = (self.encoder, self.decoder)
        if all(stack.embed_tokens.weight is self.shared.weight for stack in stacks):
            for stack in stacks:
                stack.embed_tokens = self.shared

    def get_input_embeddings(self) -> nn.Embedding:
        return self.encoder.embed_tokens

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.encoder.embed_tokens = value
        if self.config.share_encoder_decoder_embeddings:
            self.shared = value
            self.decoder.embed_tokens = value

    def resize_token_embeddings(
        self,
        new_num_tokens: int | None = None,
        pad_to_multiple_of: int | None = None,
        mean_resizing: bool = True,
    ) -> nn.Embedding:
        """Resize the source vocabulary (`vocab_size`). With one shared vocabulary (§3.4) the decoder's
        embeddings are the same matrix, and `decoder_vocab_size` follows."""
        embeddings = super().resize_token_embeddings(new_num_tokens, pad_to_multiple_of, mean_resizing)
        if self.config.share_encoder_decoder_embeddings:
            self.config.decoder_vocab_size = self.config.vocab_size
        return embeddings


# Adapted from transformers.models.marian.modeling_marian.shift_tokens_right: a copy, since a saved folder's
# code imports only transformers' public API; it also refuses a configuration without a start token.
def shift_tokens_right(
    input_ids: torch.Tensor, pad_token_id: int, decoder_start_token_id: int
) -> torch.Tensor:
    """Teacher forcing input: prepend the start token, drop the last label, and turn -100 into padding."""
    if pad_token_id is None:
        raise ValueError("`config.pad_token_id` must be set to build decoder inputs from labels.")
    if decoder_start_token_id is None:
        raise ValueError("`config.decoder_start_token_id` must be set to build decoder inputs from labels.")
    shifted = input_ids.new_zeros(input_ids.shape)
    shifted[:, 1:] = input_ids[:, :-1].clone()
    shifted[:, 0] = decoder_start_token_id
    shifted.masked_fill_(shifted == -100, pad_token_id)
    return shifted


class VanillaTransformerForConditionalGeneration(VanillaTransformerPreTrainedModel, GenerationMixin):
    """The Transformer with its output projection and softmax (§3.4): the model to train and to `generate()`
    with; its loss is label-smoothed cross-entropy (§5.4)."""

    accepts_loss_kwargs = True

    def __init__(self, config: VanillaTransformerConfig):
        super().__init__(config)
        self.model = VanillaTransformerModel(config)
        self.lm_head = nn.Linear(config.d_model, config.decoder_vocab_size, bias=config.output_bias)
        # §3.4: the output projection is the decoder's input embedding, tied if `tie_word_embeddings`.
        decoder_embedding = (
            "model.shared.weight"
            if config.share_encoder_decoder_embeddings
            else "model.decoder.embed_tokens.weight"
        )
        self._tied_weights_keys = {"lm_head.weight": decoder_embedding}
        self.post_init()
        # §6.1 decoding; a saved generation_config.json overrides these on load.
        self.generation_config.num_beams = 4
        self.generation_config.length_penalty = 0.6
        self.generation_config.early_stopping = True
        self.generation_config.max_length = min(512, config.max_position_embeddings)

    @accepts_past_key_values
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.LongTensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs: tuple[torch.Tensor] | BaseModelOutput | None = None,
        cache: Cache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        decoder_inputs_embeds: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        logits_to_keep: int = 0,
        num_items_in_batch: int | torch.Tensor | None = None,
        **kwargs,
    ) -> Seq2SeqLMOutput:
        r"""
        Args:
            input_ids (`torch.LongTensor` of shape `(batch_size, src_len)`): source token ids.
            attention_mask (`torch.Tensor` of shape `(batch_size, src_len)`): 1 for a token, 0 for padding.
            decoder_input_ids (`torch.LongTensor` of shape `(batch_size, tgt_len)`): target ids shifted right
                behind `config.decoder_start_token_id`, by default from `labels`; with `cache`, only new ones.
            decoder_attention_mask (`torch.Tensor` of shape `(batch_size, tgt_len)`): target padding mask.
            encoder_outputs ([`BaseModelOutput`] or `tuple`): the encoder's output, to skip running it again.
            cache ([`EncoderDecoderCache`]): the decoder's keys and values from earlier steps.
            inputs_embeds (`torch.Tensor` of shape `(batch_size, src_len, d_model)`): instead of `input_ids`.
            decoder_inputs_embeds (`torch.Tensor` of shape `(batch_size, tgt_len, d_model)`): instead of
                `decoder_input_ids`.
            labels (`torch.LongTensor` of shape `(batch_size, tgt_len)`): target ids ending in `</s>`, -100
                where ignored; given, the loss is computed and `use_cache` is off.
            use_cache (`bool`): return the cache for the next step (default: the config's).
            output_attentions (`bool`): return every layer's attention weights (default: the config's).
            output_hidden_states (`bool`): return every layer's hidden states (default: the config's).
            return_dict (`bool`): `False` for a tuple, not [`Seq2SeqLMOutput`].
            logits_to_keep (`int`): if > 0, logits for the last `logits_to_keep` positions only.
            num_items_in_batch (`int` or `torch.Tensor`): label tokens in all accumulated micro-batches (from
                the Trainer); the loss is then summed and divided by it, so every token weighs the same.
            kwargs: none is read; any is an error, so that an argument transformers renames fails loudly.
        """
        _reject_unused(kwargs, f"{type(self).__name__}.forward()")
        if labels is not None:
            _check_token_ids(labels, "labels")
            use_cache = False
            if decoder_input_ids is None and decoder_inputs_embeds is None:
                decoder_input_ids = self.prepare_decoder_input_ids_from_labels(labels)

        outputs = self.model(
            input_ids,
            attention_mask=attention_mask,
            decoder_input_ids=decoder_input_ids,
            encoder_outputs=encoder_outputs,
            decoder_attention_mask=decoder_attention_mask,
            cache=cache,
            inputs_embeds=inputs_embeds,
            decoder_inputs_embeds=decoder_inputs_embeds,
            use_cache=use_cache,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
        )
        hidden_states = outputs.last_hidden_state
        if logits_to_keep:
            hidden_states = hidden_states[:, -logits_to_keep:, :]
        logits = self.lm_head(hidden_states)  # (B, T, V)

        loss = None
        if labels is not None:
            loss = self.label_smoothed_loss(logits, labels, num_items_in_batch=num_items_in_batch)

        output = _output_with_cache(
            Seq2SeqLMOutput,
            getattr(outputs, CACHE_FIELD),
            loss=loss,
            logits=logits,
            decoder_hidden_states=outputs.decoder_hidden_states,
            decoder_attentions=outputs.decoder_attentions,
            cross_attentions=outputs.cross_attentions,
            encoder_last_hidden_state=outputs.encoder_last_hidden_state,
            encoder_hidden_states=outputs.encoder_hidden_states,
            encoder_attentions=outputs.encoder_attentions,
        )
        return output if return_dict is not False else output.to_tuple()

    def label_smoothed_loss(
        self,
        logits: torch.Tensor,
        labels: torch.Tensor,
        num_items_in_batch: int | torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Label-smoothed cross-entropy (§5.4), computed in float32, ignoring -100."""
        logits = logits.float().reshape(-1, logits.size(-1))
        labels = labels.to(logits.device).reshape(-1)  # any labels: a slice such as x[:, :8] too
        reduction = "mean" if num_items_in_batch is None else "sum"
        loss = nn.functional.cross_entropy(
            logits,
            labels,
            ignore_index=-100,
            reduction=reduction,
            label_smoothing=self.config.label_smoothing,
        )
        if num_items_in_batch is not None:
            if torch.is_tensor(num_items_in_batch):
                num_items_in_batch = num_items_in_batch.to(loss.device)
            loss = loss / num_items_in_batch
        return loss

    def prepare_decoder_input_ids_from_labels(self, labels: torch.Tensor) -> torch.Tensor:
        return shift_tokens_right(labels, self.config.pad_token_id, self.config.decoder_start_token_id)

    def generate(self, inputs: torch.Tensor | None = None, *args, **kwargs):
        """`GenerationMixin.generate`, refusing a call without a source, or with a source row that the
        attention mask leaves empty: from no token, the model makes up a sentence. (`forward` takes such a
        row and stays finite: a row of padding in a training batch is no mistake.)"""
        sources = ("input_ids", "inputs_embeds", "encoder_outputs")
        if inputs is None and all(kwargs.get(name) is None for name in sources):
            raise ValueError(
                "generate() got no source: pass input_ids (`**tokenizer(texts, return_tensors='pt', "
                "padding=True)`), inputs_embeds or encoder_outputs."
            )
        ids = inputs if inputs is not None else kwargs.get("input_ids")
        if ids is not None and not ids.is_floating_point():
            # Once per call, not per step: reading the ids' values waits for the device.
            _check_token_ids(ids, "input_ids", self.model.encoder.embed_tokens.num_embeddings)
        mask = kwargs.get("attention_mask")
        if mask is not None and mask.dim() == 2:
            empty = (mask == 0).all(dim=-1)
            if empty.any():
                raise ValueError(
                    f"attention_mask row {empty.nonzero()[0].item()} is all zeros: that source has no token, "
                    "and the model would make up an output from nothing. Leave the row out, or mark its "
                    "tokens 1."
                )
        return super().generate(inputs, *args, **kwargs)

    # Hooks transformers calls: submodule access, resizing, beam search's cache reordering, the saved
    # `auto_map`.

    def save_pretrained(self, *args, **kwargs):
        """Also names the bare model in `auto_map`, which transformers leaves out, for `AutoModel` loading."""
        bare = f"{type(self).__module__.rsplit('.', 1)[-1]}.{VanillaTransformerModel.__name__}"
        self.config.auto_map = {**(getattr(self.config, "auto_map", None) or {}), "AutoModel": bare}
        return super().save_pretrained(*args, **kwargs)

    def get_encoder(self):
        return self.model.encoder

    def get_decoder(self):
        return self.model.decoder

    def get_output_embeddings(self) -> nn.Linear:
        return self.lm_head

    def set_output_embeddings(self, new_embeddings: nn.Linear) -> None:
        self.lm_head = new_embeddings

    def resize_token_embeddings(
        self,
        new_num_tokens: int | None = None,
        pad_to_multiple_of: int | None = None,
        mean_resizing: bool = True,
    ) -> nn.Embedding:
        """Resize the source vocabulary (`vocab_size`), as users do after adding tokens to the tokenizer.

        With one shared vocabulary (§3.4) that is every embedding and the output layer (its bias included),
        and `decoder_vocab_size` follows. With separate vocabularies it is the encoder's embeddings only; the
        target side is resized by [`resize_decoder_token_embeddings`], as in `MarianMTModel`.
        """
        if not self.config.share_encoder_decoder_embeddings:
            return self.model.resize_token_embeddings(new_num_tokens, pad_to_multiple_of, mean_resizing)
        embeddings = super().resize_token_embeddings(new_num_tokens, pad_to_multiple_of, mean_resizing)
        self.config.decoder_vocab_size = self.config.vocab_size
        return embeddings

    def resize_decoder_token_embeddings(
        self, new_num_tokens: int, pad_to_multiple_of: int | None = None, mean_resizing: bool = True
    ) -> nn.Embedding:
        """Resize the target vocabulary of a model with separate vocabularies: the decoder's embeddings, the
        output layer and `decoder_vocab_size`."""
        if self.config.share_encoder_decoder_embeddings:
            raise ValueError(
                "This model has one vocabulary for source and target "
                "(`share_encoder_decoder_embeddings=True`): resize it with `resize_token_embeddings`."
            )
        decoder = self.model.decoder
        # No public call resizes an embedding other than the input one; MarianMTModel uses these helpers too.
        decoder.embed_tokens = self._get_resized_embeddings(
            decoder.embed_tokens, new_num_tokens, pad_to_multiple_of, mean_resizing
        )
        new_num_tokens = decoder.embed_tokens.weight.shape[0]
        self.lm_head = self._get_resized_lm_head(self.lm_head, new_num_tokens, mean_resizing=mean_resizing)
        self.config.decoder_vocab_size = new_num_tokens
        self.tie_weights()
        return decoder.embed_tokens

    def _reorder_cache(self, cache: Cache, beam_idx: torch.LongTensor) -> Cache:
        """Beam search hook: reorder the self-attention cache only, since the beams of one source share
        their cross-attention keys and values (docs/model.md)."""
        if isinstance(cache, EncoderDecoderCache):
            cache.self_attention_cache.reorder_cache(beam_idx)
        else:
            cache.reorder_cache(beam_idx)
        return cache


# --- Input checks and load errors -------------------------------------------------------------------------


class UnreadableWeightsError(OSError):
    """A saved folder's weights file is truncated or corrupt: the user downloads or saves the model again."""


def _check_token_ids(ids: torch.Tensor, name: str, vocab_size: int | None = None) -> None:
    """Refuse what the embedding or the loss would fail on deep inside torch, or answer wrongly: ids not of
    shape (batch_size, length), not integers, with no row or no token; with `vocab_size`, outside the
    vocabulary (an IndexError on the CPU, a device-side assert on a GPU). Only the shape and type are read in
    `forward`: the values would cost a wait for the device in every training step (training checks the
    tokenizer against the vocabulary once, before its data is read)."""
    if ids.dim() != 2:
        raise ValueError(
            f"{name} must have shape (batch_size, sequence_length), got {tuple(ids.shape)}: add the batch "
            f"dimension ({name}[None]), or tokenize a list of texts."
        )
    if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
        raise TypeError(f"{name} must hold integer token ids, got {ids.dtype}: pass {name}.long().")
    if ids.numel() == 0:
        raise ValueError(
            f"{name} has shape {tuple(ids.shape)}, no token at all: give at least one sequence of at least "
            "one token (the model's tokenizer makes one of any text, </s> at least)."
        )
    if vocab_size is None or torch.compiler.is_compiling() or ids.device.type == "meta":
        return
    outside = (ids < 0) | (ids >= vocab_size)
    if outside.any():
        raise ValueError(
            f"{name} holds token id {ids[outside][0].item()}, outside the model's vocabulary of "
            f"{vocab_size} ids (0 to {vocab_size - 1}): encode with the model's own tokenizer, or after "
            "adding tokens to it resize the model's embeddings (`resize_token_embeddings`)."
        )


def _check_attention_mask(mask: torch.Tensor | None, shape: torch.Size, name: str) -> None:
    """Refuse a (batch_size, length) mask that does not match its ids: the masks would be cut or padded to
    fit, silently (a 4-d mask is the caller's own, taken as is)."""
    if mask is not None and mask.dim() == 2 and mask.shape != shape:
        raise ValueError(
            f"attention_mask has shape {tuple(mask.shape)} but {name} {tuple(shape)}: give the mask the "
            "tokenizer made with the ids, one entry per token."
        )


def _reject_unused(kwargs: dict, where: str) -> None:
    """Fail on keyword arguments the model does not read: a renamed one, dropped silently, decodes wrongly."""
    if kwargs:
        raise TypeError(
            f"{where} got keyword argument(s) it does not use: {', '.join(sorted(kwargs))}. Remove them. "
            "If transformers itself passes them (a newer release renaming an argument), this model folder's "
            "code is older than the release: update it with `python scripts/update_model_code.py --model "
            "<folder>` from hf-vanilla-transformer, or install a supported transformers version."
        )


__all__ = [
    "VanillaTransformerForConditionalGeneration",
    "VanillaTransformerModel",
    "VanillaTransformerPreTrainedModel",
    "shift_tokens_right",
    "sinusoidal_position_table",
]
