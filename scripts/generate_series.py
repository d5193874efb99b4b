r"""Generate the Taylor-series data set (Judge & Prosper 2023 tutorial, at scale).

    python scripts/generate_series.py --num_examples 50000 --seed 0 --output_dir outputs/data/series-50k \
        --num_proc 2 --test_size 2000 --validation_size 1000 --timeout 2.0

Writes a ``datasets.DatasetDict`` (columns ``expression``, ``series``) and ``summary.json`` to
``--output_dir``; a folder that holds the data set the same arguments make is kept as it is (a recipe run
again), one made otherwise is refused unless ``--overwrite``. All logic lives in
``hf_vanilla_transformer.tasks.series``.
"""

import json
import sys
from dataclasses import asdict

from hf_vanilla_transformer.cli import parse_arguments, run_script
from hf_vanilla_transformer.tasks.series.dataset import SeriesDataArguments, generate_series_dataset


def main(argv: list[str] | None = None) -> dict:
    (args,) = parse_arguments(SeriesDataArguments, description=__doc__, args=argv)
    options = asdict(args)
    summary = generate_series_dataset(options.pop("output_dir"), options.pop("num_examples"), **options)
    if args.kept_summary is not None:
        print(
            f"{args.output_dir} holds the data set these arguments make: kept as it is "
            "(--overwrite makes it again).",
            file=sys.stderr,
        )
        return summary
    print(json.dumps({k: summary[k] for k in ("splits", "drops", "lengths_chars", "seconds")}, indent=2))
    print(f"Saved to {args.output_dir}", file=sys.stderr)
    return summary


if __name__ == "__main__":
    run_script(main)
