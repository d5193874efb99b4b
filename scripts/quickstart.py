"""The main job, end to end on a default that needs no download: build a small series-expansion data set
with the CAS, train its BPE tokenizer, train a small Transformer for a fixed wall-clock budget
(`--max_train_minutes`), evaluate it, save it to outputs/quickstart/run/final, reload it with
`from_pretrained`, and print its expansions next to the CAS's.

The problem is sized to be learned within that budget: expressions of one or two terms in the symbols a and b
(the recipes use up to four terms in six symbols).

    python scripts/quickstart.py            # the README says how long it takes and what it prints
    python scripts/quickstart.py --help     # its options: QuickstartArguments in the package
"""

import logging

from hf_vanilla_transformer.cli import parse_arguments, run_script
from hf_vanilla_transformer.quickstart import QuickstartArguments, run_quickstart


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    (args,) = parse_arguments(QuickstartArguments, description=__doc__)
    run_quickstart(args)


if __name__ == "__main__":
    run_script(main)
