"""The series-expansion task (after Judge & Prosper's Transformer tutorial): expression -> Taylor series to
O(x**6).

One module per concern:

- `grammar`: the names, the tokenizer's split patterns and the one safe parser, used by the generator, the
  tokenizer and the metric alike (imports only sympy and the standard library);
- `sampling`: random source expressions;
- `expansion`: the CAS's canonical series of one expression;
- `workers`: many expansions in parallel, each under a time and a memory limit;
- `dataset`: building, splitting and saving the data set, with its summary;
- `renamings`: order-preserving symbol renamings (recall versus expansion, data augmentation);
- `equivalence`: symbolic comparison of a prediction with its reference, in a worker with a time limit;
- `reports`: exact match broken down by length, arithmetic, number of terms and overlap with training data.
"""


def register_input_check() -> None:
    """Have the package's pipeline refuse series input outside the grammar (`grammar.check_model_input`),
    outside which a series model still answers, confidently and wrongly (`pipeline_seq2seq.INPUT_CHECKS`,
    keyed by the task a model's config names), and never split it into sentences."""
    from ..pipeline_seq2seq import INPUT_CHECKS, UNSPLIT_TASKS
    from .grammar import check_model_input

    INPUT_CHECKS["series"] = check_model_input
    UNSPLIT_TASKS.add("series")  # an expression is no text of sentences
