"""One process of tests/test_scale_out.py's FSDP2 test, run under `accelerate launch --config_file
scripts/accelerate_configs/fsdp.yaml --num_processes 2`: the launcher turns the shipped yaml into the FSDP_*
variables that `FullyShardedDataParallelPlugin()` reads, as it does for a training script on GPUs.

Accelerate runs FSDP only on GPUs (on a CPU its state is MULTI_CPU, and `prepare` would wrap the model in
DDP), so this calls accelerate's own FSDP2 wrapping, `fsdp2_prepare_model`, directly on the gloo process
group. Every process trains the wrapped model on its half of one global batch with SGD, saves a checkpoint
after three of five updates as the Trainer does under FSDP (accelerate's `save_fsdp_model` and
`save_fsdp_optimizer` with the yaml's state dict type, then `FullWeightsCallback`'s full weights), and
resumes a second wrapped model from it. The main process saves the gathered final weights of both (as
`training.run_training` gathers them), and a plain copy of the model trained on the whole batch; every
process writes what the test checks to `<output_dir>/rank-<i>.json`.

    accelerate launch --config_file scripts/accelerate_configs/fsdp.yaml --num_processes 2 \
        --mixed_precision no tests/fsdp_worker.py OUTPUT_DIR

With `--marian` after OUTPUT_DIR it wraps transformers' `MarianMTModel` instead and reports how that went.
"""

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import torch
from accelerate import Accelerator
from accelerate.utils import DistributedType, FullyShardedDataParallelPlugin
from accelerate.utils.fsdp_utils import (
    fsdp2_prepare_model,
    load_fsdp_model,
    load_fsdp_optimizer,
    save_fsdp_model,
    save_fsdp_optimizer,
)

from hf_vanilla_transformer import VanillaTransformerConfig, VanillaTransformerForConditionalGeneration
from hf_vanilla_transformer.training.exits import end_process
from hf_vanilla_transformer.training.full_weights import FullWeightsCallback, gathered_model
from tests.conftest import make_word_tokenizer

STEPS = 5
LEARNING_RATE = 0.3
MOMENTUM = 0.9  # so that the optimizer has a state to save and resume


def global_batch(vocab_size: int) -> dict[str, torch.Tensor]:
    """Four pairs of different lengths (so the halves hold different token counts), right-padded."""
    generator = torch.Generator().manual_seed(0)
    lengths = [(7, 6), (3, 5), (6, 2), (5, 7)]
    input_ids = torch.zeros(4, 7, dtype=torch.long)
    labels = torch.full((4, 7), -100)
    for row, (source, target) in enumerate(lengths):
        input_ids[row, :source] = torch.randint(4, vocab_size, (source,), generator=generator)
        labels[row, :target] = torch.randint(4, vocab_size, (target,), generator=generator)
    return {"input_ids": input_ids, "attention_mask": input_ids.ne(0).long(), "labels": labels}


def fresh_model() -> VanillaTransformerForConditionalGeneration:
    torch.manual_seed(0)
    config = VanillaTransformerConfig.from_preset("transformer-tiny", vocab_size=40, dropout=0.0)
    return VanillaTransformerForConditionalGeneration(config)


def wrapped(accelerator: Accelerator):
    """A fresh model wrapped by Accelerate's FSDP2 code, and its optimizer."""
    model = fsdp2_prepare_model(accelerator, fresh_model())
    return model, torch.optim.SGD(model.parameters(), lr=LEARNING_RATE, momentum=MOMENTUM)


def train(model, optimizer, batch: dict, steps: int, world: int = 1, rank: int = 0) -> list[float]:
    """`steps` updates on `batch`, of which this process takes its share; the losses of the whole batch."""
    tokens = int(batch["labels"].ne(-100).sum())  # the whole batch's: every token weighs the same
    share = {name: tensor.chunk(world)[rank] for name, tensor in batch.items()}
    losses = []
    for _ in range(steps):
        # Gradients are averaged over processes; each loss is this process's share of the batch's mean.
        loss = model(**share, num_items_in_batch=tokens).loss * world
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        loss = loss.detach()
        if world > 1:
            torch.distributed.all_reduce(loss)
        losses.append(float(loss) / world)
    return losses


def main(output_dir: Path) -> None:
    output_dir.mkdir(parents=True, exist_ok=True)
    accelerator = Accelerator(cpu=True)
    rank, world = accelerator.process_index, accelerator.num_processes
    # What AcceleratorState holds for FSDP on GPUs: the plugin (configured by the launcher's variables) and
    # the distributed type, which `get_state_dict` and `unwrap_model` read.
    plugin = accelerator.state.fsdp_plugin = FullyShardedDataParallelPlugin()
    accelerator.state.distributed_type = DistributedType.FSDP
    batch = global_batch(fresh_model().config.vocab_size)

    model, optimizer = wrapped(accelerator)
    losses = train(model, optimizer, batch, STEPS - 2, world, rank)
    # A checkpoint as the Trainer writes one under FSDP: accelerate's model and optimizer state for resuming,
    # and the gathered weights for averaging.
    checkpoint = output_dir / f"checkpoint-{STEPS - 2}"
    save_fsdp_model(plugin, accelerator, model, checkpoint)
    save_fsdp_optimizer(plugin, accelerator, optimizer, model, checkpoint)
    # The Trainer calls its callbacks' `on_save` on every process after writing a checkpoint.
    tokenizer = make_word_tokenizer()
    trainer = SimpleNamespace(accelerator=accelerator, model_wrapped=model, processing_class=tokenizer)
    save = SimpleNamespace(output_dir=str(output_dir)), SimpleNamespace(global_step=STEPS - 2), None
    FullWeightsCallback(trainer).on_save(*save)
    losses += train(model, optimizer, batch, 2, world, rank)

    resumed, resumed_optimizer = wrapped(accelerator)
    load_fsdp_model(plugin, accelerator, resumed, checkpoint)
    load_fsdp_optimizer(plugin, accelerator, resumed_optimizer, resumed, checkpoint)
    resumed_losses = train(resumed, resumed_optimizer, batch, 2, world, rank)

    unwrapped = accelerator.unwrap_model(model)
    tied = (
        unwrapped.model.encoder.embed_tokens is unwrapped.model.shared
        and unwrapped.model.decoder.embed_tokens is unwrapped.model.shared
        and unwrapped.lm_head.weight is unwrapped.model.shared.weight
    )
    final, final_resumed = gathered_model(accelerator, model), gathered_model(accelerator, resumed)
    if accelerator.is_main_process:
        final.save_pretrained(output_dir / "final")
        final_resumed.save_pretrained(output_dir / "resumed")
        reference = fresh_model()
        reference_optimizer = torch.optim.SGD(reference.parameters(), lr=LEARNING_RATE, momentum=MOMENTUM)
        train(reference, reference_optimizer, batch, STEPS)
        reference.save_pretrained(output_dir / "reference")
    (output_dir / f"rank-{rank}.json").write_text(
        json.dumps(
            {
                "losses": losses,
                "resumed_losses": resumed_losses,
                "tied": tied,
                "world": world,
                "state_dict_type": str(plugin.state_dict_type),
            }
        )
    )
    end_process(accelerator)


def marian(output_dir: Path) -> None:
    """The same wrapping of `MarianMTModel` at the same size, for comparison: each process writes how its
    first training step went to `<output_dir>/marian-rank-<i>.json`."""
    from transformers import MarianConfig, MarianMTModel

    output_dir.mkdir(parents=True, exist_ok=True)
    accelerator = Accelerator(cpu=True)
    accelerator.state.fsdp_plugin = FullyShardedDataParallelPlugin(
        transformer_cls_names_to_wrap=["MarianEncoderLayer", "MarianDecoderLayer"]
    )
    accelerator.state.distributed_type = DistributedType.FSDP
    torch.manual_seed(0)
    sizes = {"d_model": 32, "encoder_layers": 2, "decoder_layers": 2, "encoder_ffn_dim": 64}
    sizes |= {"decoder_ffn_dim": 64, "encoder_attention_heads": 4, "decoder_attention_heads": 4}
    config = MarianConfig(vocab_size=40, pad_token_id=0, decoder_start_token_id=0, **sizes)
    try:
        model = fsdp2_prepare_model(accelerator, MarianMTModel(config))
        batch = global_batch(config.vocab_size)
        model(**batch).loss.backward()
        outcome = "trained"
    except Exception as error:  # what fails, and where, is the result
        outcome = f"{type(error).__name__}: {error}"
    path = output_dir / f"marian-rank-{accelerator.process_index}.json"
    path.write_text(json.dumps({"outcome": outcome}))
    print(f"MarianMTModel, process {accelerator.process_index}: {outcome}")


if __name__ == "__main__":
    (marian if sys.argv[2:] == ["--marian"] else main)(Path(sys.argv[1]))
