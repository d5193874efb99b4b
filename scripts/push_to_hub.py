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
"""

import argparse

from hf_vanilla_transformer.cli import ArgumentParser, run_script
from hf_vanilla_transformer.hub import build_hub_folder, push_folder, upload_plan


def main() -> None:
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--folder", required=True, help="The folder to upload (assembled first with --model)."
    )
    parser.add_argument(
        "--model", default=None, help="A trained model folder to assemble into --folder before uploading."
    )
    parser.add_argument(
        "--card", default=None, help="With --model: the model card (default: --folder's README.md)."
    )
    parser.add_argument("--repo_id", default=None, help="Hub repository, e.g. you/vanilla-transformer-x.")
    parser.add_argument("--dry_run", action="store_true", help="List what would be uploaded; upload nothing.")
    parser.add_argument("--private", action="store_true", help="Create the repository as private.")
    args = parser.parse_args()
    if not args.dry_run and not args.repo_id:
        parser.error("--repo_id is required unless --dry_run is given.")
    if args.model is not None:
        build_hub_folder(args.model, args.folder, card=args.card)
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
