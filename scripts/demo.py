r"""A demo page for saved models of this package: text in, generated text out, with the decoding settings a
user touches, the cross-attention of a chosen decoder layer and head as a heat map, and, for series models,
the CAS's expansion beside the model's with a verdict. Needs `pip install -e ".[demo]"` (Gradio).

    python scripts/demo.py                                   # the trained models shipped in model_cards/
    python scripts/demo.py --model outputs/multi30k-de-en/averaged --model series=outputs/series-50k/averaged
    python scripts/demo.py --model outputs/opus-mt-de-en --port 7860      # a converted Marian model

Each `--model` is a saved folder or a Hub id, with `series=` in front for a series-expansion model (its page
adds the CAS and the verdict); it gets a tab of its own. As a Hugging Face Space: set `app_file:
scripts/demo.py` in the Space's README and the models in the `DEMO_MODELS` variable (comma-separated, same
syntax); the page then listens where the Space expects it. Without either, it serves the trained models
shipped in this repository's model_cards/ folders. See docs/demo.md.
"""

from dataclasses import dataclass, field
from pathlib import Path

from hf_vanilla_transformer.cli import parse_arguments, run_script
from hf_vanilla_transformer.demo import resolve_model_specs, serve

# The trained models shipped with the repository: each card folder that holds weights.
SHIPPED_MODELS = Path(__file__).resolve().parents[1] / "model_cards"


@dataclass
class DemoArguments:
    model: list[str] | None = field(
        default=None,
        metadata={
            "help": "[series=]<saved folder or Hub id>; repeat for several models (one tab each). Default: "
            "the trained models shipped in model_cards/.",
            "action": "extend",
        },
    )
    host: str | None = field(
        default=None, metadata={"help": "Interface to listen on (default 127.0.0.1; 0.0.0.0 for all)."}
    )
    port: int | None = field(
        default=None, metadata={"help": "Port (default: Gradio's, 7860 or the next free)."}
    )


def main() -> None:
    (args,) = parse_arguments(DemoArguments, description=__doc__)
    serve(resolve_model_specs(args.model, SHIPPED_MODELS), args.host, args.port)


if __name__ == "__main__":
    run_script(main)
