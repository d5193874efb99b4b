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

The task itself, as the task registry knows it, is `hf_vanilla_transformer.tasks.series`.
"""
