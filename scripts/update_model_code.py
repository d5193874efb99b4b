r"""Bring the code of a saved model folder or Hub repository up to date: its modeling, configuration and
pipeline files are replaced with the installed package's; config.json's `auto_map` gains the bare model
(`AutoModel`) if it lacks it, and generation_config.json loses the defaults earlier transformers releases
spelled out (as v5 writes it; the folder's decoding is kept). Weights and tokenizer are left as they are.

A saved folder carries its code, so that `trust_remote_code=True` loads it without this package; a fix to that
code reaches only folders saved after it. Folders saved before 0.2 (when transformers 5.24 renamed the decoder
cache) decode wrongly under transformers >= 5.24 until updated.

    python scripts/update_model_code.py --model outputs/multi30k-de-en/averaged
    python scripts/update_model_code.py --model you/vanilla-transformer-multi30k-de-en   # a Hub repository
"""

from dataclasses import dataclass, field

from hf_vanilla_transformer.cli import parse_arguments, run_script
from hf_vanilla_transformer.readers import is_local_path


@dataclass
class UpdateArguments:
    model: str = field(metadata={"help": "A saved model folder, or a Hub repository id."})
    dry_run: bool = field(default=False, metadata={"help": "List the files that would change; change none."})
    token: str | None = field(
        default=None, metadata={"help": "Hub token (default: `hf auth login` or HF_TOKEN)."}
    )


def main() -> None:
    (args,) = parse_arguments(UpdateArguments, description=__doc__)
    # torch, once the options are known to be right (`--help` and a mistyped option answer at once)
    from hf_vanilla_transformer.interop.updates import update_hub_model_code, update_model_code

    if is_local_path(args.model):
        changed = update_model_code(args.model, dry_run=args.dry_run)
    else:
        changed = update_hub_model_code(args.model, token=args.token, dry_run=args.dry_run)
    verb = "Would replace" if args.dry_run else "Replaced"
    print(
        f"{verb} in {args.model}: {', '.join(changed)}"
        if changed
        else f"{args.model}: the code is up to date."
    )


if __name__ == "__main__":
    run_script(main)
