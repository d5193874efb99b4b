"""The encoder-decoder Transformer of "Attention Is All You Need" (Vaswani et al., 2017) for transformers v5.

Read top to bottom it is the paper's model, bottom-up as in `transformers/models/marian/modeling_marian.py`:
positions, attention, the feed-forward network, the residual sublayer (post- or pre-LN), the encoder and
decoder layers, the pre-trained base class (initialisation), the encoder and decoder stacks, the bare model,
and the model with its output projection and loss. Within each class the paper comes first; what transformers
needs of it (weight ties, resizing, cache names, load errors) follows under a "transformers' plumbing"
comment, and the module-level plumbing closes the file. Section numbers (§) refer to the paper.

This file imports only `torch`, `transformers` (and `safetensors`, which transformers requires) and its
sibling configuration file, so that a saved model folder can carry it for `trust_remote_code` loading. What
it uses of transformers beyond the public API is listed, with the reasons, in docs/compatibility.md.
"""

import dataclasses
import math
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

from .configuration_vanilla_transformer import VanillaTransformerConfig


def sinusoidal_position_table(num_positions: int, dim: int, layout: str = "interleaved") -> torch.Tensor:
    """§3.5: PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model)).

    `layout="interleaved"` places them exactly as the paper writes them; `"halves"` puts all sines first, then
    all cosines, as Marian and fairseq do (the same values, permuted), so that their checkpoints compute here
    what they computed there.
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
    """Position embeddings added to the scaled token embeddings: the fixed sinusoids of §3.5, or a learned
    table.

    The sinusoidal table is a non-persistent buffer: it is never saved and is refilled by `_init_weights`
    (models are built on the meta device in transformers v5).
    """

    def __init__(self, num_positions: int, dim: int, learned: bool, layout: str = "interleaved"):
        super().__init__()
        self.num_positions = num_positions
        self.learned = learned
        self.layout = layout
        if learned:
            self.weight = nn.Parameter(torch.empty(num_positions, dim))
        else:
            table = sinusoidal_position_table(num_positions, dim, layout)
            self.register_buffer("weight", table, persistent=False)

    def forward(self, seq_len: int, past_length: int | torch.Tensor = 0) -> torch.Tensor:
        """Positions `past_length .. past_length + seq_len - 1`. `past_length` is a Python int (dynamic
        cache) or a 0-dim tensor (static cache): indexing with a tensor of positions, rather than slicing
        at a Python int, lets `torch.compile` trace one graph for every decoding step."""
        # Checked where the length is a Python int (free). A static cache's length is a tensor: reading it
        # would sync the device every step and cannot be branched on in a compiled graph, so the decoder
        # checks the cache's allocated size once instead.
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

    `attention_mask` is additive (0 where allowed, the dtype's minimum where not), as built by
    `transformers.masking_utils`, so no constant such as -1e9 can overflow in half precision.
    """
    attn_weights = torch.matmul(query, key.transpose(2, 3)) * scaling  # (B, h, Tq, Tk)
    q_len, kv_len = query.shape[2], key.shape[2]
    if attention_mask is None and is_causal and q_len > 1:
        # Under SDPA the mask helpers skip an all-causal mask (SDPA's `is_causal` does it); this kernel
        # also serves SDPA models when attention weights are requested, so build the mask here.
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
    encoder-decoder attention (`key_value_states` given). With a cache, self-attention keys/values grow
    by the new positions each step, and cross-attention keys/values are computed once per sequence and
    reused.
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

        # `is_updated` and `layers[i].keys` are the cache's attributes, not methods: transformers has no
        # public call that returns a layer's cached keys without appending to them, and its own
        # encoder-decoder models (Marian, BART) read them the same way. tests/test_modeling.py pins this
        # (cross-attention projected once).
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

        # Attention weights can only be returned by the eager kernel; use it for calls that ask for them.
        attention_interface: Callable = (
            eager_attention_forward
            if output_attentions
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
    """What every encoder and decoder layer is made of (§3.1): residual sublayers with dropout on their output
    (§5.4). The paper's order is post-LN, LayerNorm(x + Dropout(Sublayer(x))); `normalize_before=True` is
    pre-LN, x + Dropout(Sublayer(LayerNorm(x))). Both orders use the same LayerNorm modules, so a checkpoint
    has the same keys either way."""

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
    """Decoder layer, §3.1: masked self-attention, encoder-decoder attention, then the feed-forward network,
    each a residual sublayer. The causal mask keeps position i from attending to positions after i.

    Without `encoder_hidden_states` the encoder-decoder attention sublayer is skipped, as in Marian's and
    BART's decoder layers, and the layer is that of a decoder-only language model.
    """

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
    # Device placement (`device_map`) must not move the cache between layers, under either of its names
    # (`CACHE_NAMES`).
    _skip_keys_device_placement = ["cache", "past_key_values"]
    # Declares, as Marian does, that a decoding step traces to one graph (no data-dependent Python), so that
    # generate(cache_implementation="static") can compile it; tests/test_modeling.py checks it.
    _can_compile_fullgraph = True

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        """N(0, d_model^-0.5) embeddings, as fairseq initialises this model (the paper does not say): scaled
        by sqrt(d_model) (§3.4) they start at unit variance. Linear layers follow `config.init_method`."""
        embed_std = self.config.init_std if self.config.init_std is not None else self.config.d_model**-0.5
        # transformers initialises module by module and skips, for remote code, a module without parameters of
        # its own (the attention, the feed-forward block): the linear layers fairseq's scheme treats apart are
        # marked with a role where they are built.
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
            # As transformers' own default `_init_weights` does: a weight loaded from a checkpoint carries
            # `_is_hf_initialized`, and its padding row must stay as loaded.
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

    # transformers' plumbing: the configuration checked before sizing, readable load errors, module ties.

    def __init__(self, config: VanillaTransformerConfig, *inputs, **kwargs):
        # One shared vocabulary has one size, `vocab_size`: the decoder's follows it (Marian sizes its decoder
        # by `vocab_size` when shared), so that a configuration whose `vocab_size` was set alone, as
        # transformers' common tests and resizing do, builds one model.
        if config.share_encoder_decoder_embeddings:
            config.decoder_vocab_size = config.vocab_size
        # A configuration checks each field alone when it is set after construction; how the fields combine
        # (heads dividing d_model) is checked here, before any layer is sized.
        config.validate()
        super().__init__(config, *inputs, **kwargs)

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *model_args, **kwargs):
        try:
            return super().from_pretrained(pretrained_model_name_or_path, *model_args, **kwargs)
        except SafetensorError as error:
            # safetensors' own message ("Error while deserializing header") names neither file nor remedy.
            raise UnreadableWeightsError(
                f"Could not read the weights of {pretrained_model_name_or_path!s}: a .safetensors file there "
                f"is truncated or corrupt ({error}). Download or save the model again; nothing was loaded."
            ) from error

    def tie_weights(self, *args, **kwargs):
        """transformers' tying of Parameters, then one step more: where the stacks share one vocabulary
        (§3.4), their `embed_tokens` become the `shared` module itself. Sharding engines group modules, not
        Parameters: Accelerate's FSDP2 wrapping shards `get_input_embeddings()` with the output layer in a
        group of their own, and torch refuses a Parameter that another module outside that group still holds.
        One module is wrapped once wherever it appears. Only Parameters already tied are joined:
        `from_pretrained` builds the model untied and loads the holders one by one (so that a checkpoint
        without the matrix is reported missing), then calls this."""
        super().tie_weights(*args, **kwargs)
        for module in self.modules():
            if isinstance(module, VanillaTransformerModel):
                module.share_embedding_module()


class _VanillaTransformerStack(VanillaTransformerPreTrainedModel):
    """What encoder and decoder share: token embeddings, positions, the layer stack, and the final LayerNorm
    that pre-LN needs (the residual stream is otherwise never normalised).

    Each stack builds its `embed_tokens`; when the vocabulary is shared (§3.4), [`VanillaTransformerModel`]
    ties their weights to its `shared` matrix, as Marian does, and then makes them that module
    (`tie_weights`).
    """

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
            raise ValueError("Pass exactly one of `input_ids` and `inputs_embeds`.")
        if inputs_embeds is None:
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
        output_attentions, output_hidden_states = self._output_flags(output_attentions, output_hidden_states)
        hidden_states = self.embed(input_ids, inputs_embeds)
        attention_mask = create_bidirectional_mask(
            config=self.config, inputs_embeds=hidden_states, attention_mask=attention_mask
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
    """A stack of `config.decoder_layers` decoder layers (§3.1) over embedded, right-shifted target tokens.

    Without `encoder_hidden_states` the decoder runs alone, as a causal language model: every layer skips its
    encoder-decoder attention and the cache fills only its self-attention half. This is how Marian's decoder
    behaves (`MarianForCausalLM` is built on it); the project imports Marian/OPUS-MT checkpoints, so code
    written against Marian's decoder must run on this one unchanged. Within the encoder-decoder model the
    decoder always gets the encoder output.
    """

    def __init__(self, config: VanillaTransformerConfig):
        super().__init__(
            config, config.decoder_vocab_size, VanillaTransformerDecoderLayer, config.decoder_layers
        )

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
        past_key_values: Cache | None = None,
    ) -> BaseModelOutputWithPastAndCrossAttentions:
        """`cache` holds the keys and values of earlier decoding steps (`past_key_values` before transformers
        5.24; either name is accepted)."""
        cache = _one_cache(cache, past_key_values)
        output_attentions, output_hidden_states = self._output_flags(output_attentions, output_hidden_states)
        use_cache = use_cache if use_cache is not None else self.config.use_cache
        if self.gradient_checkpointing and self.training and use_cache:
            use_cache = False  # the backward replay would write the cache a second time
        if use_cache and cache is None:
            cache = EncoderDecoderCache(DynamicCache(config=self.config), DynamicCache(config=self.config))

        past_length = cache.get_seq_length() if cache is not None else 0
        if cache is not None and cache.is_compileable:
            # A fixed-size (static) cache: its length is a tensor, which the position embedding does not read,
            # so check the size it was allocated with (a Python int). A dynamic cache grows, and positions
            # are checked at every step.
            capacity = cache.get_max_length()
            if capacity > self.config.max_position_embeddings:
                raise ValueError(
                    f"The static cache holds {capacity} decoder positions, more than the model allows "
                    f"(max_position_embeddings={self.config.max_position_embeddings}). Lower "
                    f"`max_new_tokens` or `max_length` to at most {self.config.max_position_embeddings}."
                )
        hidden_states = self.embed(input_ids, inputs_embeds, past_length)
        self_attn_cache = cache.self_attention_cache if isinstance(cache, EncoderDecoderCache) else cache
        # Masks hold the dtype's minimum (eager) or booleans (SDPA); `None` where nothing is masked. The cache
        # goes by position: the keyword is `past_key_values` before transformers 5.24 and `cache` from it on.
        causal_mask = create_causal_mask(
            self.config,
            hidden_states,
            attention_mask,
            self_attn_cache,
            position_ids=(
                torch.arange(hidden_states.shape[1], device=hidden_states.device) + past_length
            ).unsqueeze(0),
        )
        if encoder_hidden_states is not None:
            encoder_attention_mask = create_bidirectional_mask(
                config=self.config,
                inputs_embeds=hidden_states,
                attention_mask=encoder_attention_mask,
                encoder_hidden_states=encoder_hidden_states,
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
        output = BaseModelOutputWithPastAndCrossAttentions(
            last_hidden_state=hidden_states,
            **{CACHE_FIELD: cache if use_cache else None},
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
            # §3.4: one embedding matrix for both stacks, tied into each stack's `embed_tokens` as a
            # parameter first, as Marian ties it: `from_pretrained` builds the model untied, loads, then ties
            # (and joins the modules, `tie_weights`), so that a checkpoint without this matrix is reported
            # missing.
            self.shared = nn.Embedding(config.vocab_size, config.d_model, config.pad_token_id)
            self._tied_weights_keys = {
                "encoder.embed_tokens.weight": "shared.weight",
                "decoder.embed_tokens.weight": "shared.weight",
            }
        self.encoder = VanillaTransformerEncoder(config)
        self.decoder = VanillaTransformerDecoder(config)
        self.post_init()

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
        past_key_values: Cache | None = None,
        **kwargs,
    ) -> Seq2SeqModelOutput:
        r"""
        decoder_input_ids (`torch.LongTensor` of shape `(batch_size, target_length)`):
            Right-shifted target tokens starting with `config.decoder_start_token_id` (see
            `shift_tokens_right`). With `cache`, only the tokens not yet in the cache.
        encoder_outputs: the encoder's output, to skip running the encoder again (as `generate()` does).
        cache: the decoder's `EncoderDecoderCache` from earlier steps; `past_key_values` is its name before
            transformers 5.24 and is accepted too (not both).
        Any other keyword argument is an error rather than ignored (see `_reject_unused`).
        """
        _reject_unused(kwargs, f"{type(self).__name__}.forward()")
        cache = _one_cache(cache, past_key_values)
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
        output = Seq2SeqModelOutput(
            last_hidden_state=decoder_outputs.last_hidden_state,
            **{CACHE_FIELD: getattr(decoder_outputs, CACHE_FIELD)},
            decoder_hidden_states=decoder_outputs.hidden_states,
            decoder_attentions=decoder_outputs.attentions,
            cross_attentions=decoder_outputs.cross_attentions,
            encoder_last_hidden_state=encoder_outputs.last_hidden_state,
            encoder_hidden_states=encoder_outputs.hidden_states,
            encoder_attentions=encoder_outputs.attentions,
        )
        return output if return_dict is not False else output.to_tuple()

    # transformers' plumbing: weight ties, embedding access and resizing.

    def get_expanded_tied_weights_keys(self, all_submodels: bool = False) -> dict[str, str]:
        """transformers ties no weight at all when `config.tie_word_embeddings` is off. Here that flag
        concerns `lm_head` only; `share_encoder_decoder_embeddings` alone decides whether the stacks share
        their input embeddings. transformers has no public switch for a tie that does not follow
        `tie_word_embeddings` (Marian shares the same limit), so this overrides the method `post_init` reads;
        tests/test_loading.py pins the ties of every layout through save and reload."""
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
    with.

    The loss for `labels` is cross-entropy with the label smoothing of `config.label_smoothing` (§5.4),
    ignoring -100. Under gradient accumulation the Trainer passes `num_items_in_batch`, and the loss is
    summed over tokens and divided by that count, so every token weighs the same whatever the split.
    """

    accepts_loss_kwargs = True

    def __init__(self, config: VanillaTransformerConfig):
        super().__init__(config)
        self.model = VanillaTransformerModel(config)
        self.lm_head = nn.Linear(config.d_model, config.decoder_vocab_size, bias=config.output_bias)
        # §3.4: the output projection is the decoder's input embedding. Ties of the bare model (its `shared`
        # matrix) come with it; transformers applies this one only when `config.tie_word_embeddings` is on.
        decoder_embedding = (
            "model.shared.weight"
            if config.share_encoder_decoder_embeddings
            else "model.decoder.embed_tokens.weight"
        )
        self._tied_weights_keys = {"lm_head.weight": decoder_embedding}
        self.post_init()
        # §6.1 decoding: beam size 4, length penalty alpha 0.6, stop when no beam can improve. A saved
        # generation_config.json (written by `save_pretrained`) carries these and overrides them on load.
        self.generation_config.num_beams = 4
        self.generation_config.length_penalty = 0.6
        self.generation_config.early_stopping = True
        self.generation_config.max_length = min(512, config.max_position_embeddings)

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
        past_key_values: Cache | None = None,
        **kwargs,
    ) -> Seq2SeqLMOutput:
        r"""
        labels (`torch.LongTensor` of shape `(batch_size, target_length)`, *optional*):
            Target tokens ending in `</s>`, -100 where ignored. Without `decoder_input_ids`, the decoder input
            is `shift_tokens_right(labels)` (teacher forcing).
        logits_to_keep: if > 0, compute logits for the last `logits_to_keep` positions only.
        num_items_in_batch: number of non-ignored label tokens over all accumulated micro-batches
            (passed by the Trainer); the loss is then a sum divided by it.
        cache / past_key_values: the decoder cache, as in [`VanillaTransformerModel.forward`] (one name only).
        Any other keyword argument is an error rather than ignored.
        """
        _reject_unused(kwargs, f"{type(self).__name__}.forward()")
        cache = _one_cache(cache, past_key_values)
        if labels is not None:
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

        output = Seq2SeqLMOutput(
            loss=loss,
            logits=logits,
            **{CACHE_FIELD: getattr(outputs, CACHE_FIELD)},
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

    # transformers' plumbing: submodule access, resizing, beam search's cache hook, the saved `auto_map`.

    def save_pretrained(self, *args, **kwargs):
        """`PreTrainedModel.save_pretrained`, with the bare model named in `auto_map` beside this one:
        transformers writes the Auto class of the saved model only, and `AutoModel.from_pretrained(folder,
        trust_remote_code=True)` then loads the encoder-decoder without its head."""
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
        # transformers has no public call that resizes an embedding other than the input one. These helpers
        # are the ones its `resize_token_embeddings` and MarianMTModel's `resize_decoder_token_embeddings`
        # use; tests/test_resize.py pins what they do here (rows kept, new rows added, tying, save and
        # reload).
        decoder.embed_tokens = self._get_resized_embeddings(
            decoder.embed_tokens, new_num_tokens, pad_to_multiple_of, mean_resizing
        )
        new_num_tokens = decoder.embed_tokens.weight.shape[0]
        self.lm_head = self._get_resized_lm_head(self.lm_head, new_num_tokens, mean_resizing=mean_resizing)
        self.config.decoder_vocab_size = new_num_tokens
        self.tie_weights()
        return decoder.embed_tokens

    def _reorder_cache(self, cache: Cache, beam_idx: torch.LongTensor) -> Cache:
        """Beam search hook: reorder the self-attention cache only.

        generate() expands the encoder output once per beam, so the cross-attention keys/values of the beams
        of one source are identical, and `beam_idx` only ever picks among the beams of the same source.
        Reordering them (what the default does every step) would copy each layer's cross-attention cache
        onto itself; skipping it saves that copy on every step of beam search.
        """
        if isinstance(cache, EncoderDecoderCache):
            cache.self_attention_cache.reorder_cache(beam_idx)
        else:
            cache.reorder_cache(beam_idx)
        return cache


# --- transformers' plumbing -------------------------------------------------------------------------------
# What the classes above need to live in transformers across its releases, not part of the paper's model.

# transformers 5.24 renamed the decoder cache from `past_key_values` to `cache`: `generate()` passes `cache=`
# and reads `outputs.cache`, and the output classes have a `cache` field (the old name is a deprecated alias
# there). The model takes either name and returns its cache under the field the installed release defines, so
# that one saved folder decodes correctly under releases before and after the rename.
CACHE_NAMES = ("cache", "past_key_values")
# Read once at import (the output classes of one release all use one name), so that a compiled decoding step
# sees a constant.
CACHE_FIELD = (
    "cache" if "cache" in {field.name for field in dataclasses.fields(Seq2SeqLMOutput)} else "past_key_values"
)


class UnreadableWeightsError(OSError):
    """A saved folder's weights file is truncated or corrupt: the user downloads or saves the model again."""


def _one_cache(cache: Cache | None, past_key_values: Cache | None) -> Cache | None:
    if cache is not None and past_key_values is not None:
        raise TypeError(
            "Got both `cache` and `past_key_values`: they are one argument, named `cache` since "
            "transformers 5.24 and `past_key_values` before. Pass only one of them."
        )
    if past_key_values is not None and CACHE_FIELD == "cache" and not torch.compiler.is_compiling():
        # As transformers' own models warn from 5.24 on (a FutureWarning: DeprecationWarnings are hidden).
        warnings.warn(
            "`past_key_values` is deprecated since transformers 5.24, which renamed it. Use `cache` instead.",
            FutureWarning,
            stacklevel=3,
        )
    return past_key_values if cache is None else cache


def _reject_unused(kwargs: dict, where: str) -> None:
    """Fail on keyword arguments the model does not read: dropped silently, a renamed argument (as the cache
    was in transformers 5.24) makes the model compute something else with no error."""
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
