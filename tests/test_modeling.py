"""The model behaves like an encoder-decoder that ships inside transformers: cache, masks, loss, tying."""

import copy

import pytest
import torch
from huggingface_hub.errors import StrictDataclassFieldValidationError
from transformers import AutoConfig, CompileConfig, EncoderDecoderCache

from hf_vanilla_transformer import (
    VanillaTransformerConfig,
    VanillaTransformerForConditionalGeneration,
    shift_tokens_right,
)
from hf_vanilla_transformer.cli import CONFIG_ERRORS as STRICT_ERRORS
from hf_vanilla_transformer.modeling_vanilla_transformer import CACHE_FIELD, sinusoidal_position_table

from .conftest import TINY_VOCAB, tiny_config

# A configuration's refusals: `@strict`'s errors (a preset's unknown name is a `ValueError`).
CONFIG_ERRORS = (ValueError, *STRICT_ERRORS)


def _teacher_forced_logits(model, batch, sequences):
    """Logits of one forward pass over the whole generated prefix (no cache)."""
    with torch.no_grad():
        return model(**batch, decoder_input_ids=sequences[:, :-1], use_cache=False).logits


# 1. Cached decoding equals a full recompute ------------------------------------------------------------


@pytest.mark.parametrize("normalize_before", [False, True])
@pytest.mark.parametrize("position_embedding_type", ["sinusoidal", "learned"])
def test_greedy_cached_logits_match_full_forward(padded_batch, normalize_before, position_embedding_type):
    torch.manual_seed(0)
    model = VanillaTransformerForConditionalGeneration(
        tiny_config(normalize_before=normalize_before, position_embedding_type=position_embedding_type)
    ).eval()
    out = model.generate(
        **padded_batch,
        num_beams=1,
        do_sample=False,
        max_new_tokens=12,
        min_new_tokens=12,
        return_dict_in_generate=True,
        output_logits=True,
    )
    step_logits = torch.stack(out.logits, dim=1)  # (B, T, V), one step at a time with the cache
    full_logits = _teacher_forced_logits(model, padded_batch, out.sequences)
    assert step_logits.shape == full_logits.shape == (3, 12, TINY_VOCAB)
    torch.testing.assert_close(step_logits, full_logits, atol=1e-5, rtol=0)


def test_beam_search_scores_match_full_forward(padded_batch, tiny_model):
    """Each returned beam's score (length_penalty 0: the sum of its log-probs) equals a full recompute."""
    out = tiny_model.generate(
        **padded_batch,
        num_beams=3,
        num_return_sequences=3,
        length_penalty=0.0,
        max_new_tokens=10,
        early_stopping=True,
        return_dict_in_generate=True,
        output_scores=True,
    )
    batch = {k: v.repeat_interleave(3, dim=0) for k, v in padded_batch.items()}
    logprobs = _teacher_forced_logits(tiny_model, batch, out.sequences).log_softmax(-1)
    targets = out.sequences[:, 1:]
    token_logprobs = logprobs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    # Positions after the first </s> are padding, not scored by beam search.
    eos = tiny_model.config.eos_token_id
    finished_before = torch.cumsum((targets == eos).int(), dim=1) - (targets == eos).int()
    recomputed = (token_logprobs * (finished_before == 0)).sum(-1)
    torch.testing.assert_close(out.sequences_scores, recomputed, atol=1e-5, rtol=0)


def test_cache_grows_one_position_per_step_and_cross_attention_is_computed_once(padded_batch, tiny_model):
    calls = {"k_proj": 0}
    cross_k_proj = tiny_model.model.decoder.layers[0].encoder_attn.k_proj
    hook = cross_k_proj.register_forward_hook(lambda *_: calls.__setitem__("k_proj", calls["k_proj"] + 1))
    out = tiny_model.generate(
        **padded_batch, num_beams=1, max_new_tokens=6, min_new_tokens=6, return_dict_in_generate=True
    )
    hook.remove()
    assert calls["k_proj"] == 1, "cross-attention keys must be projected once per generate() call"
    cache = getattr(out, CACHE_FIELD)
    assert cache.self_attention_cache.get_seq_length() == 6  # start token + 5 generated tokens fed back
    assert cache.cross_attention_cache.get_seq_length() == padded_batch["input_ids"].shape[1]


def test_static_cache_greedy_decoding_compiles_to_one_graph_and_matches_dynamic_cache(
    padded_batch, tiny_model
):
    """generate(cache_implementation="static") with a compile config: the decoder step must trace with
    fullgraph=True (data-dependent Python, such as slicing positions at a cache length read as an int,
    fails here) and decode exactly as the default dynamic cache. The backend records the traced graphs
    and runs them as they are: generating C++ kernels (inductor) would take minutes; benchmark.py
    --compile times that."""
    graphs = []

    def recording_backend(graph_module, example_inputs):
        graphs.append(graph_module)
        return graph_module.forward

    compile_config = CompileConfig(fullgraph=True, backend=recording_backend, mode="default")
    compile_config._compile_all_devices = True  # transformers compiles only on accelerators unless told
    settings = dict(num_beams=1, max_new_tokens=8, min_new_tokens=8, do_sample=False)
    dynamic = tiny_model.generate(**padded_batch, **settings)
    torch._dynamo.reset()
    static = tiny_model.generate(
        **padded_batch, cache_implementation="static", compile_config=compile_config, **settings
    )
    torch._dynamo.reset()
    assert graphs, "generate() did not compile the decoder step"
    assert torch.equal(static, dynamic)


def test_static_cache_beam_search_matches_dynamic_cache(padded_batch, tiny_model):
    # transformers compiles only greedy/sampling steps; beam search runs the static cache uncompiled.
    settings = dict(num_beams=3, max_new_tokens=8, min_new_tokens=8, early_stopping=True)
    static = tiny_model.generate(**padded_batch, cache_implementation="static", **settings)
    assert torch.equal(static, tiny_model.generate(**padded_batch, **settings))


# The decoder alone: a causal language model, as Marian's decoder ----------------------------------------


def _decoder_only_logits(model, input_ids, **kwargs):
    decoder_output = model.get_decoder()(input_ids=input_ids, **kwargs)
    return model.lm_head(decoder_output.last_hidden_state), decoder_output


@pytest.mark.parametrize("normalize_before", [False, True])
def test_decoder_alone_runs_as_causal_lm_and_cached_steps_match_full_forward(normalize_before):
    torch.manual_seed(0)
    model = VanillaTransformerForConditionalGeneration(tiny_config(normalize_before=normalize_before)).eval()
    cross_calls = []
    hooks = [
        layer.encoder_attn.register_forward_hook(lambda *_: cross_calls.append(1))
        for layer in model.get_decoder().layers
    ]
    input_ids = torch.randint(4, TINY_VOCAB, (2, 7), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        full_logits, full = _decoder_only_logits(model, input_ids, use_cache=True, output_attentions=True)
        assert full.last_hidden_state.shape == (2, 7, 32)
        assert len(full.attentions) == 2 and full.cross_attentions is None
        assert torch.triu(full.attentions[0][0, 0], diagonal=1).abs().max() == 0  # causal
        full_cache = getattr(full, CACHE_FIELD)
        assert isinstance(full_cache, EncoderDecoderCache)
        assert full_cache.self_attention_cache.get_seq_length() == 7
        assert full_cache.cross_attention_cache.get_seq_length() == 0

        # Prefix of 3 in one call, then one token at a time through the cache.
        step_logits, step = _decoder_only_logits(model, input_ids[:, :3], use_cache=True)
        steps, cache = [step_logits], getattr(step, CACHE_FIELD)
        for position in range(3, 7):
            step_logits, step = _decoder_only_logits(
                model, input_ids[:, position : position + 1], cache=cache, use_cache=True
            )
            steps.append(step_logits)
            cache = getattr(step, CACHE_FIELD)
    for hook in hooks:
        hook.remove()
    assert not cross_calls, "the decoder alone must skip encoder-decoder attention"
    assert cache.self_attention_cache.get_seq_length() == 7
    torch.testing.assert_close(torch.cat(steps, dim=1), full_logits, atol=1e-5, rtol=0)
    # Position i sees only positions up to i: a shorter input gives the same first logits.
    torch.testing.assert_close(
        _decoder_only_logits(model, input_ids[:, :4], use_cache=False)[0],
        full_logits[:, :4],
        atol=1e-5,
        rtol=0,
    )


def test_decoder_alone_respects_padding_mask():
    torch.manual_seed(0)
    model = VanillaTransformerForConditionalGeneration(tiny_config()).eval()
    input_ids = torch.tensor([[5, 6, 7, 8], [9, 10, 0, 0]])
    with torch.no_grad():
        padded, _ = _decoder_only_logits(model, input_ids, attention_mask=(input_ids != 0).long())
        alone, _ = _decoder_only_logits(model, input_ids[1:, :2])
    torch.testing.assert_close(padded[1, :2], alone[0], atol=1e-5, rtol=0)


# 2. Padding does not leak ------------------------------------------------------------------------------


def test_padded_batch_matches_rows_alone(padded_batch, tiny_model):
    batch_out = tiny_model.generate(
        **padded_batch, num_beams=2, max_new_tokens=8, return_dict_in_generate=True
    )
    decoder_input_ids = torch.randint(4, TINY_VOCAB, (3, 5), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        batch_forward = tiny_model(**padded_batch, decoder_input_ids=decoder_input_ids)
    for row in range(3):
        length = int(padded_batch["attention_mask"][row].sum())
        alone = {"input_ids": padded_batch["input_ids"][row : row + 1, :length]}
        with torch.no_grad():
            row_forward = tiny_model(**alone, decoder_input_ids=decoder_input_ids[row : row + 1])
        torch.testing.assert_close(
            batch_forward.encoder_last_hidden_state[row, :length],
            row_forward.encoder_last_hidden_state[0],
            atol=1e-5,
            rtol=0,
        )
        torch.testing.assert_close(batch_forward.logits[row], row_forward.logits[0], atol=1e-5, rtol=0)
        row_out = tiny_model.generate(**alone, num_beams=2, max_new_tokens=8)
        generated = batch_out.sequences[row][: row_out.shape[1]]
        assert generated.tolist() == row_out[0].tolist()


def test_decoder_padding_does_not_change_real_positions(tiny_model, padded_batch):
    labels = torch.tensor([[5, 6, 7, 2], [8, 9, 2, -100], [10, 2, -100, -100]])
    decoder_input_ids = shift_tokens_right(labels, 0, 1)
    decoder_attention_mask = (decoder_input_ids != 0).long()
    with torch.no_grad():
        padded = tiny_model(
            **padded_batch, decoder_input_ids=decoder_input_ids, decoder_attention_mask=decoder_attention_mask
        ).logits
        for row, length in enumerate((4, 3, 2)):
            alone = tiny_model(
                input_ids=padded_batch["input_ids"][row : row + 1],
                attention_mask=padded_batch["attention_mask"][row : row + 1],
                decoder_input_ids=decoder_input_ids[row : row + 1, :length],
            ).logits
            torch.testing.assert_close(padded[row, :length], alone[0], atol=1e-5, rtol=0)


# 3. Attention kernels and precision --------------------------------------------------------------------


def test_sdpa_is_default_and_matches_eager(padded_batch):
    config = tiny_config()
    torch.manual_seed(0)
    sdpa = VanillaTransformerForConditionalGeneration(copy.deepcopy(config)).eval()
    eager = VanillaTransformerForConditionalGeneration._from_config(
        copy.deepcopy(config), attn_implementation="eager"
    ).eval()
    eager.load_state_dict(sdpa.state_dict())
    assert sdpa.config._attn_implementation == "sdpa"
    assert eager.config._attn_implementation == "eager"
    decoder_input_ids = torch.randint(4, TINY_VOCAB, (3, 6), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        a = sdpa(**padded_batch, decoder_input_ids=decoder_input_ids).logits
        b = eager(**padded_batch, decoder_input_ids=decoder_input_ids).logits
    torch.testing.assert_close(a, b, atol=1e-5, rtol=0)


@pytest.mark.parametrize("attn_implementation", ["sdpa", "eager"])
def test_bfloat16_forward_is_finite_with_fully_padded_rows(padded_batch, attn_implementation):
    torch.manual_seed(0)
    model = VanillaTransformerForConditionalGeneration._from_config(
        tiny_config(), attn_implementation=attn_implementation, dtype=torch.bfloat16
    ).eval()
    assert model.model.shared.weight.dtype == torch.bfloat16
    batch = {k: v.clone() for k, v in padded_batch.items()}
    batch["input_ids"][2] = 0
    batch["attention_mask"][2] = 0  # a row with no real token at all
    decoder_input_ids = torch.randint(4, TINY_VOCAB, (3, 5), generator=torch.Generator().manual_seed(4))
    decoder_attention_mask = torch.ones_like(decoder_input_ids)
    decoder_attention_mask[1] = 0
    with torch.no_grad():
        out = model(
            **batch, decoder_input_ids=decoder_input_ids, decoder_attention_mask=decoder_attention_mask
        )
    assert torch.isfinite(out.logits.float()).all()
    assert torch.isfinite(out.encoder_last_hidden_state.float()).all()


def test_output_attentions_returns_weights_with_sdpa_default(padded_batch, tiny_model):
    decoder_input_ids = torch.tensor([[1, 5, 6], [1, 7, 8], [1, 9, 10]])
    out = tiny_model(
        **padded_batch, decoder_input_ids=decoder_input_ids, output_attentions=True, output_hidden_states=True
    )
    assert len(out.encoder_attentions) == 2 and out.encoder_attentions[0].shape == (3, 4, 7, 7)
    assert out.decoder_attentions[0].shape == (3, 4, 3, 3)
    assert out.cross_attentions[1].shape == (3, 4, 3, 7)
    assert len(out.encoder_hidden_states) == 3 and len(out.decoder_hidden_states) == 3
    # Rows sum to 1; padded source positions get no weight; the decoder never looks ahead.
    torch.testing.assert_close(out.cross_attentions[0].sum(-1), torch.ones(3, 4, 3))
    assert out.cross_attentions[0][1, :, :, 4:].abs().max() == 0
    assert torch.triu(out.decoder_attentions[0][0, 0], diagonal=1).abs().max() == 0


# 6. Loss ------------------------------------------------------------------------------------------------


def test_loss_is_label_smoothed_cross_entropy(padded_batch, tiny_model):
    labels = torch.tensor([[5, 6, 7, 2], [8, 9, 2, -100], [10, 2, -100, -100]])
    out = tiny_model(**padded_batch, labels=labels)
    expected = torch.nn.functional.cross_entropy(
        out.logits.reshape(-1, TINY_VOCAB), labels.reshape(-1), ignore_index=-100, label_smoothing=0.1
    )
    torch.testing.assert_close(out.loss, expected)
    assert tiny_model.config.label_smoothing == 0.1
    # decoder input is labels shifted right behind the start token, -100 turned into padding
    assert shift_tokens_right(labels, 0, 1).tolist() == [[1, 5, 6, 7], [1, 8, 9, 2], [1, 10, 2, 0]]


def test_loss_takes_labels_that_are_not_contiguous(padded_batch, tiny_model):
    """A slice of a wider tensor, as other models' losses take it; `view` would refuse it."""
    wide = torch.tensor([[5, 6, 7, 2, 9, 9], [8, 9, 2, -100, 9, 9], [10, 2, -100, -100, 9, 9]])
    labels = wide[:, :4]
    assert not labels.is_contiguous()
    loss = tiny_model(**padded_batch, labels=labels).loss
    torch.testing.assert_close(loss, tiny_model(**padded_batch, labels=labels.contiguous()).loss)


def test_loss_under_gradient_accumulation_equals_full_batch(padded_batch, tiny_model):
    """Two micro-batches with `num_items_in_batch` give the full batch's loss and gradient, although
    they hold different numbers of target tokens (a plain mean of means would not)."""
    labels = torch.tensor([[5, 6, 7, 8, 9, 2], [8, 9, 2, -100, -100, -100], [10, 2, -100, -100, -100, -100]])
    tiny_model.train()
    torch.manual_seed(0)
    tiny_model.config.dropout = 0.0
    for module in tiny_model.modules():
        if hasattr(module, "dropout") and isinstance(module.dropout, float):
            module.dropout = 0.0
    full = tiny_model(**padded_batch, labels=labels).loss
    full.backward()
    full_grad = tiny_model.model.shared.weight.grad.clone()
    tiny_model.zero_grad()

    num_items = int((labels != -100).sum())
    accumulated = 0.0
    for rows in (slice(0, 1), slice(1, 3)):
        micro = {k: v[rows] for k, v in padded_batch.items()}
        loss = tiny_model(**micro, labels=labels[rows], num_items_in_batch=num_items).loss
        loss.backward()
        accumulated += loss.item()
    assert accumulated == pytest.approx(full.item(), abs=1e-5)
    torch.testing.assert_close(tiny_model.model.shared.weight.grad, full_grad, atol=1e-6, rtol=1e-5)


# 7. Configuration, presets, limits, weights ------------------------------------------------------------


@pytest.mark.parametrize(
    ("preset", "low", "high"), [("transformer-base", 63e6, 66e6), ("transformer-big", 210e6, 216e6)]
)
def test_paper_presets_parameter_counts(preset, low, high):
    config = VanillaTransformerConfig.from_preset(preset, vocab_size=37000)
    with torch.device("meta"):
        model = VanillaTransformerForConditionalGeneration(config)
    count = sum(p.numel() for p in model.parameters() if p.requires_grad)  # tied weights counted once
    assert low <= count <= high, f"{preset}: {count / 1e6:.2f}M parameters"


def test_paper_defaults():
    config = VanillaTransformerConfig()
    assert (config.d_model, config.encoder_layers, config.decoder_layers) == (512, 6, 6)
    assert (config.encoder_attention_heads, config.encoder_ffn_dim, config.activation_function) == (
        8,
        2048,
        "relu",
    )
    assert (config.dropout, config.label_smoothing, config.normalize_before) == (0.1, 0.1, False)
    assert config.position_embedding_type == "sinusoidal" and config.scale_embedding
    assert config.share_encoder_decoder_embeddings and config.tie_word_embeddings
    assert (config.hidden_size, config.num_attention_heads, config.num_hidden_layers) == (512, 8, 6)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"d_model": 30, "encoder_attention_heads": 4}, r"`d_model` \(30\).*`encoder_attention_heads` \(4\)"),
        ({"decoder_attention_heads": 5}, r"`decoder_attention_heads` \(5\)"),
        ({"decoder_vocab_size": 99}, r"`vocab_size` is 40 and `decoder_vocab_size` is 99"),
        ({"position_embedding_type": "rotary"}, r"field 'position_embedding_type'.*'rotary'"),
        ({"dropout": 1.5}, r"field 'dropout'.*must be in \[0, 1\), got 1.5"),
        ({"encoder_layers": 0}, r"field 'encoder_layers'.*must be a positive integer, got 0"),
        ({"pad_token_id": 40}, r"`pad_token_id` \(40\)"),
        ({"langs": ["de", "de"]}, r"field 'langs'.*two different language codes, source then target"),
        ({"langs": ["de"]}, r"field 'langs'.*got \['de'\]"),
    ],
)
def test_bad_config_raises_naming_values(overrides, message):
    # transformers' configurations are `@strict` dataclasses: a field is refused as it is set, a combination
    # by `validate_architecture` once all are set; both errors name the field and the values.
    with pytest.raises(CONFIG_ERRORS, match=f"(?s){message}"):
        tiny_config(**overrides)


@pytest.mark.parametrize(
    ("aliases", "message"),
    [
        (
            {"hidden_size": 30, "num_attention_heads": 4},
            r"`d_model` \(30\) must be divisible by `encoder_attention_heads` \(4\).*"
            r"Choose a head count that divides 30",
        ),
        # The alias reaches the encoder only: the decoder keeps 8 heads, which do not divide 36.
        (
            {"hidden_size": 36, "num_attention_heads": 4},
            r"`d_model` \(36\) must be divisible by `decoder_attention_heads` \(8\)",
        ),
        ({"num_hidden_layers": 0}, r"`encoder_layers` must be a positive integer, got 0"),
    ],
)
def test_config_built_through_aliases_is_validated(aliases, message):
    with pytest.raises(STRICT_ERRORS, match=f"(?s){message}"):
        AutoConfig.for_model("vanilla_transformer", **aliases)
    with pytest.raises(STRICT_ERRORS, match=f"(?s){message}"):
        VanillaTransformerConfig(**aliases)


def test_aliases_set_what_the_docstring_says():
    config = AutoConfig.for_model(
        "vanilla_transformer", hidden_size=64, num_attention_heads=4, num_hidden_layers=3
    )
    assert (config.d_model, config.encoder_attention_heads, config.encoder_layers) == (64, 4, 3)
    assert (config.decoder_attention_heads, config.decoder_layers) == (8, 6)  # the decoder's own values
    # Given both ways, the alias's value is the field's, as in transformers' own configurations.
    assert VanillaTransformerConfig(d_model=64, hidden_size=32).d_model == 32
    # A preset override given by alias replaces the preset's field.
    assert VanillaTransformerConfig.from_preset("transformer-tiny", hidden_size=64).d_model == 64
    with pytest.raises(CONFIG_ERRORS, match=r"`d_model` \(30\).*`encoder_attention_heads` \(4\)"):
        VanillaTransformerConfig.from_preset("transformer-tiny", hidden_size=30)


def test_from_pretrained_overrides_by_alias_are_validated(tmp_path):
    tiny_config().save_pretrained(tmp_path)
    assert AutoConfig.from_pretrained(tmp_path, hidden_size=64).d_model == 64
    with pytest.raises(
        CONFIG_ERRORS, match=r"`d_model` \(30\) must be divisible by `encoder_attention_heads` \(4\)"
    ):
        AutoConfig.from_pretrained(tmp_path, hidden_size=30)


def test_setting_fields_after_construction_is_validated(tmp_path):
    config = tiny_config()
    # A field that is wrong on its own is rejected when set by its name, and left unchanged.
    for name, value, message in [
        ("encoder_attention_heads", 0, r"field 'encoder_attention_heads'.*must be a positive integer, got 0"),
        ("encoder_layers", 1.5, r"field 'encoder_layers'.*expected int"),
        ("d_model", -32, r"field 'd_model'.*must be a positive integer, got -32"),
        ("dropout", 1.5, r"field 'dropout'.*must be in \[0, 1\), got 1.5"),
        ("position_embedding_type", "rotary", r"field 'position_embedding_type'.*'rotary'"),
    ]:
        before = getattr(config, name)
        with pytest.raises(StrictDataclassFieldValidationError, match=f"(?s){message}"):
            setattr(config, name, value)
        assert getattr(config, name) == before
    # Set by an alias (transformers' `attribute_map` writes past the field's check), it is refused before a
    # model is built from it, and before it is saved.
    config.hidden_size = -32
    with pytest.raises(CONFIG_ERRORS, match=r"`d_model` must be a positive integer, got -32"):
        VanillaTransformerForConditionalGeneration(config)
    with pytest.raises(CONFIG_ERRORS, match=r"`d_model` must be a positive integer, got -32"):
        config.save_pretrained(tmp_path)
    # Fields that only fail together can be edited one at a time; the combination is checked before a model
    # is built from it, and before it is saved.
    config.hidden_size = 30
    with pytest.raises(
        CONFIG_ERRORS, match=r"`d_model` \(30\) must be divisible by `encoder_attention_heads` \(4\)"
    ):
        VanillaTransformerForConditionalGeneration(config)
    with pytest.raises(CONFIG_ERRORS, match=r"`d_model` \(30\)"):
        config.save_pretrained(tmp_path)
    config.update({"num_attention_heads": 5, "decoder_attention_heads": 5})
    model = VanillaTransformerForConditionalGeneration(config)
    assert model.model.encoder.layers[0].self_attn.head_dim == 6


def test_unknown_preset_lists_available():
    with pytest.raises(ValueError, match="transformer-base"):
        VanillaTransformerConfig.from_preset("transformer-huge")


@pytest.mark.parametrize("position_embedding_type", ["learned", "sinusoidal"])
def test_input_longer_than_positions_raises_naming_limit(position_embedding_type):
    model = VanillaTransformerForConditionalGeneration(
        tiny_config(position_embedding_type=position_embedding_type, max_position_embeddings=16)
    ).eval()
    with pytest.raises(ValueError, match="max_position_embeddings=16"):
        model(input_ids=torch.full((1, 17), 5), decoder_input_ids=torch.tensor([[1]]))
    with pytest.raises(ValueError, match="max_position_embeddings=16"):
        model(input_ids=torch.full((1, 4), 5), decoder_input_ids=torch.full((1, 17), 5))
    # A static cache is sized up front; its compiled steps cannot check positions, so its size is checked.
    with pytest.raises(ValueError, match="static cache holds 33 .*max_position_embeddings=16"):
        model.generate(input_ids=torch.full((1, 4), 5), max_new_tokens=33, cache_implementation="static")


def test_sinusoidal_table_is_the_papers_formula():
    table = sinusoidal_position_table(50, 16)
    pos, i = 7, 3
    angle = torch.tensor(pos / 10000 ** (2 * i / 16))
    torch.testing.assert_close(table[pos, 2 * i], torch.sin(angle))
    torch.testing.assert_close(table[pos, 2 * i + 1], torch.cos(angle))


def test_embeddings_are_scaled_and_three_way_tied(tiny_model):
    model = tiny_model.model
    assert model.encoder.embed_tokens.weight is model.shared.weight
    assert model.decoder.embed_tokens.weight is model.shared.weight
    assert tiny_model.lm_head.weight is model.shared.weight
    assert model.encoder.embed_scale == pytest.approx(32**0.5)


def test_untied_vocabularies():
    config = tiny_config(
        share_encoder_decoder_embeddings=False, decoder_vocab_size=23, tie_word_embeddings=True
    )
    model = VanillaTransformerForConditionalGeneration(config).eval()
    assert model.model.encoder.embed_tokens.weight.shape[0] == TINY_VOCAB
    assert model.lm_head.weight is model.model.decoder.embed_tokens.weight
    out = model(input_ids=torch.tensor([[30, 35, 2]]), labels=torch.tensor([[20, 2]]))
    assert out.logits.shape == (1, 2, 23)


def test_gradient_checkpointing_gives_same_gradients(padded_batch):
    torch.manual_seed(0)
    model = VanillaTransformerForConditionalGeneration(tiny_config(dropout=0.0)).train()
    labels = torch.tensor([[5, 6, 2], [7, 2, -100], [8, 9, 2]])
    model(**padded_batch, labels=labels).loss.backward()
    reference = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    model.gradient_checkpointing_enable()
    assert model.model.encoder.layers[0].gradient_checkpointing
    model(**padded_batch, labels=labels).loss.backward()
    for name, param in model.named_parameters():
        torch.testing.assert_close(param.grad, reference[name], atol=1e-6, rtol=1e-5, msg=name)


# 5. It learns: a tiny model overfits a reversal task ---------------------------------------------------


@pytest.mark.parametrize("init_method", ["fairseq", "xavier"])
def test_tiny_model_learns_to_reverse_sequences(init_method):
    """Exact generation on every training pair shows that masks, shift and loss are right, not just shapes.
    At a constant learning rate the fit wavers once reached, so it is checked every 25 updates (within 300;
    both initialisations get there in about 100 here)."""
    torch.manual_seed(0)
    config = VanillaTransformerConfig.from_preset(
        "transformer-tiny",
        vocab_size=16,
        d_model=64,
        encoder_ffn_dim=128,
        decoder_ffn_dim=128,
        dropout=0.0,
        label_smoothing=0.0,
        init_method=init_method,
    )
    model = VanillaTransformerForConditionalGeneration(config)
    generator = torch.Generator().manual_seed(0)
    sources = torch.randint(4, 16, (32, 6), generator=generator)
    eos = torch.full((32, 1), config.eos_token_id)
    labels = torch.cat([sources.flip(1), eos], dim=1)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3, betas=(0.9, 0.98), eps=1e-9)
    exact = False
    for step in range(1, 301):
        loss = model(input_ids=sources, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if step % 25 == 0:
            generated = model.eval().generate(input_ids=sources, num_beams=1, max_length=8)
            model.train()
            # generated = <s> reversed </s>
            exact = generated[:, 1:8].tolist() == labels.tolist()
            if exact:
                break
    assert exact, f"no exact reversal of all 32 pairs in {step} updates"


def test_output_bias_is_added_to_the_logits_and_saved_beside_the_tied_matrix(tmp_path, padded_batch):
    """The tutorial's output layer and Marian's `final_logits_bias`; the paper's projection has no bias."""
    assert VanillaTransformerForConditionalGeneration(tiny_config()).lm_head.bias is None
    torch.manual_seed(0)
    model = VanillaTransformerForConditionalGeneration(tiny_config(output_bias=True)).eval()
    torch.nn.init.normal_(model.lm_head.bias)
    assert model.lm_head.weight is model.model.shared.weight  # still tied (§3.4)
    decoder_input_ids = padded_batch["input_ids"][:, :4]
    with torch.no_grad():
        outputs = model(**padded_batch, decoder_input_ids=decoder_input_ids, output_hidden_states=True)
        expected = outputs.decoder_hidden_states[-1] @ model.model.shared.weight.T + model.lm_head.bias
    torch.testing.assert_close(outputs.logits, expected)
    model.save_pretrained(tmp_path)
    reloaded, info = VanillaTransformerForConditionalGeneration.from_pretrained(
        tmp_path, output_loading_info=True
    )
    assert not info["missing_keys"] and not info["unexpected_keys"]
    torch.testing.assert_close(reloaded.lm_head.bias, model.lm_head.bias)
    assert reloaded.lm_head.weight is reloaded.model.shared.weight


def test_halves_layout_is_marians_sinusoid_table_and_the_paper_default_is_interleaved():
    """Marian and fairseq put all sines first (a permutation of §3.5's table); their checkpoints need it."""
    from transformers.models.marian.modeling_marian import MarianSinusoidalPositionalEmbedding

    marian = MarianSinusoidalPositionalEmbedding(50, 32).create_weight()
    torch.testing.assert_close(
        sinusoidal_position_table(50, 32, "halves"), marian, atol=2e-6, rtol=0
    )  # Marian computes in float64
    interleaved = sinusoidal_position_table(50, 32)
    torch.testing.assert_close(interleaved[:, 0::2], marian[:, :16], atol=2e-6, rtol=0)
    torch.testing.assert_close(interleaved[:, 1::2], marian[:, 16:], atol=2e-6, rtol=0)
    model = VanillaTransformerForConditionalGeneration(tiny_config(sinusoid_layout="halves"))
    table = model.model.encoder.embed_positions.weight
    torch.testing.assert_close(table, sinusoidal_position_table(*table.shape, "halves"))
    assert VanillaTransformerForConditionalGeneration(tiny_config()).config.sinusoid_layout == "interleaved"
    with pytest.raises(
        StrictDataclassFieldValidationError,
        match=r"(?s)field 'sinusoid_layout'.*must be one of interleaved, halves, got 'cosines-first'",
    ):
        tiny_config(sinusoid_layout="cosines-first")


def test_fairseq_initialisation_scales_qkv_and_leaves_the_feed_forward_at_torchs_default():
    """`init_method="fairseq"`: q/k/v Xavier-uniform at gain 1/sqrt(2) with uniform biases, the feed-forward
    layers at nn.Linear's default bound 1/sqrt(fan_in); everything else as the default, "xavier"."""
    from transformers import AutoModelForSeq2SeqLM

    def build(**overrides):
        return VanillaTransformerConfig.from_preset("transformer-small", vocab_size=1000, **overrides)

    assert build().init_method == "fairseq"  # the default, since it learned more per update
    torch.manual_seed(0)
    xavier = VanillaTransformerForConditionalGeneration(build(init_method="xavier"))
    built = VanillaTransformerForConditionalGeneration(build(init_method="fairseq"))
    for model in (built, AutoModelForSeq2SeqLM.from_config(build(init_method="fairseq"))):
        layers = [*model.model.encoder.layers, *model.model.decoder.layers]
        plain_layers = [*xavier.model.encoder.layers, *xavier.model.decoder.layers]
        for layer, plain in zip(layers, plain_layers, strict=True):
            pairs = [(layer.self_attn, plain.self_attn)]
            if hasattr(layer, "encoder_attn"):
                pairs.append((layer.encoder_attn, plain.encoder_attn))
            for attention, reference in pairs:
                for name in ("q_proj", "k_proj", "v_proj"):
                    ours, theirs = getattr(attention, name), getattr(reference, name)
                    assert (ours.weight.std() / theirs.weight.std()).item() == pytest.approx(
                        2**-0.5, rel=0.03
                    )
                    assert (
                        theirs.bias.abs().max() == 0 and 0.9 * 256**-0.5 < ours.bias.abs().max() <= 256**-0.5
                    )
                assert attention.out_proj.bias.abs().max() == 0  # as "xavier": zero bias
                assert (
                    attention.out_proj.weight.std() / reference.out_proj.weight.std()
                ).item() == pytest.approx(1, rel=0.03)
            for fc in (layer.mlp.fc1, layer.mlp.fc2):
                bound = fc.in_features**-0.5
                for tensor in (fc.weight, fc.bias):
                    assert 0.9 * bound < tensor.abs().max() <= bound
        assert (model.model.shared.weight.std() / xavier.model.shared.weight.std()).item() == pytest.approx(
            1, rel=0.03
        )
    with pytest.raises(
        StrictDataclassFieldValidationError,
        match=r"(?s)field 'init_method'.*must be one of xavier, fairseq, got 'kaiming'",
    ):
        tiny_config(init_method="kaiming")


def test_decoder_vocabulary_follows_a_shared_vocabulary_set_alone():
    """transformers' common test `test_resize_tokens_embeddings` sets `config.vocab_size` alone and builds the
    model: with one shared vocabulary there is one size, as Marian sizes it."""
    config = tiny_config()
    config.vocab_size = 4
    assert VanillaTransformerForConditionalGeneration(config).lm_head.weight.shape[0] == 4
    assert config.decoder_vocab_size == 4
    separate = tiny_config(share_encoder_decoder_embeddings=False, decoder_vocab_size=50)
    separate.vocab_size = 4
    assert VanillaTransformerForConditionalGeneration(separate).lm_head.weight.shape[0] == 50
    assert separate.decoder_vocab_size == 50  # separate vocabularies keep their own sizes
