r"""Publish a trained model to the Hugging Face Hub: weights (safetensors), config with auto_map, the model
and pipeline code for `trust_remote_code`, tokenizer, generation config, and its model card as README.md.

    python scripts/push_to_hub.py --model outputs/multi30k-de-en/averaged \
        --card model_cards/vanilla-transformer-multi30k-de-en/README.md \
        --repo_id you/vanilla-transformer-multi30k-de-en
    # only write the folder (inspect it, or load it with from_pretrained):
    python scripts/push_to_hub.py --model ... --card ... --dry_run --folder outputs/hub/multi30k
"""

import argparse

from hf_vanilla_transformer.hub import build_hub_folder, push_folder


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", required=True, help="A saved model folder (with its tokenizer).")
    parser.add_argument("--card", default=None, help="The model card (model_cards/<name>/README.md).")
    parser.add_argument(
        "--repo_id",
        default=None,
        help="Hub repository, e.g. user/vanilla-transformer-multi30k; it replaces the card's <owner>/<name>.",
    )
    parser.add_argument("--folder", default="outputs/hub/model", help="Where to assemble the upload.")
    parser.add_argument("--dry_run", action="store_true", help="Write the folder only; upload nothing.")
    parser.add_argument("--private", action="store_true", help="Create the repository as private.")
    args = parser.parse_args()
    if not args.dry_run and not args.repo_id:
        parser.error("--repo_id is required unless --dry_run is given.")
    folder = build_hub_folder(args.model, args.card, args.folder, repo_id=args.repo_id)
    print(f"Assembled {folder}: {', '.join(sorted(p.name for p in folder.iterdir()))}")
    if not args.dry_run:
        print(f"Uploaded to {push_folder(folder, args.repo_id, private=args.private)}")


if __name__ == "__main__":
    main()
