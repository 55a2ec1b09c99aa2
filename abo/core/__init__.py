"""What a study is made of: parameters and spaces, outcomes, trials, linear constraints,
fidelities, stopping rules, Pareto utilities and the errors. The bottom layer: it imports no
other part of abo, and nothing here loads torch at import."""
