r"""Evaluate a saved model on a split (named evaluate_model.py: a scripts/evaluate.py would shadow the
`evaluate` library for every script in this folder).

Batched generation (the folder's saved generation config unless the decoding options say otherwise: the same
options as translate.py's, sampling included), the task's metrics, a JSON report with every prediction.

    python scripts/evaluate_model.py --model outputs/multi30k-de-en/final --task translation \
        --dataset outputs/data/multi30k-de-en --source_lang de --target_lang en --split test
    python scripts/evaluate_model.py --model outputs/series-50k/final --task series \
        --dataset outputs/data/series-50k --split test --num_beams 1
"""

import logging

from hf_vanilla_transformer.cli import parse_arguments, run_script
from hf_vanilla_transformer.evaluation.scoring import EvaluationArguments, evaluate_model, format_report
from hf_vanilla_transformer.tasks import DatasetArguments


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    eval_args, data_args = parse_arguments(EvaluationArguments, DatasetArguments, description=__doc__)
    report = evaluate_model(eval_args, data_args)
    print(format_report(report, eval_args.show_examples))


if __name__ == "__main__":
    run_script(main)
