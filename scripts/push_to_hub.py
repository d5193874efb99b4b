r"""Publish a model folder to the Hugging Face Hub, as it is: weights (safetensors), config with auto_map, the
model and pipeline code for `trust_remote_code`, tokenizer, generation config, evaluation reports, and the
model card as README.md (its `<owner>/<name>` placeholders become the repository id).

    # the shipped models: their folders are ready
    python scripts/push_to_hub.py --folder model_cards/vanilla-transformer-multi30k-de-en \
        --repo_id you/vanilla-transformer-multi30k-de-en
    python scripts/push_to_hub.py --folder model_cards/vanilla-transformer-multi30k-de-en --dry_run

    # a model you trained: assemble its folder first (a card is needed: model_cards/<name>/README.md is one)
    python scripts/push_to_hub.py --model outputs/multi30k-de-en/averaged --card my_card.md \
        --folder outputs/hub/my-model --dry_run

A folder that holds a model already (a shipped one in model_cards/, say) is assembled over only with
`--overwrite`.
"""

from dataclasses import dataclass, field

from hf_vanilla_transformer.cli import parse_arguments, run_script
from hf_vanilla_transformer.errors import UsageError


@dataclass
class PushArguments:
    folder: str = field(metadata={"help": "The folder to upload (assembled first with --model)."})
    model: str | None = field(
        default=None, metadata={"help": "A trained model folder to assemble into --folder before uploading."}
    )
    card: str | None = field(
        default=None, metadata={"help": "With --model: the model card (default: --folder's README.md)."}
    )
    repo_id: str | None = field(
        default=None, metadata={"help": "Hub repository, e.g. you/vanilla-transformer-x."}
    )
    dry_run: bool = field(default=False, metadata={"help": "List what would be uploaded; upload nothing."})
    private: bool = field(default=False, metadata={"help": "Create the repository as private."})
    overwrite: bool = field(
        default=False, metadata={"help": "With --model: replace a model that --folder holds already."}
    )


def main() -> None:
    (args,) = parse_arguments(PushArguments, description=__doc__)
    if not args.dry_run and not args.repo_id:
        raise UsageError("--repo_id is required unless --dry_run is given.")
    # torch, once the options are known to be right (`--help` and a mistyped option answer at once)
    from hf_vanilla_transformer.interop.hub import build_hub_folder, push_folder, upload_plan

    if args.model is not None:
        build_hub_folder(args.model, args.folder, card=args.card, overwrite=args.overwrite)
        print(f"Assembled {args.folder} from {args.model}")
    plan = upload_plan(args.folder)
    total = sum(size for _, size in plan)
    print(f"{len(plan)} files, {total / 1e6:.1f} MB, to {args.repo_id or '<repo_id>'}:")
    for name, size in plan:
        print(f"  {name}  ({size:,} bytes)")
    if not args.dry_run:
        print(f"Uploaded to {push_folder(args.folder, args.repo_id, private=args.private)}")


if __name__ == "__main__":
    run_script(main)
