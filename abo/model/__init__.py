"""The surrogate: abo's Gaussian process (priors, likelihood, output warping), its fit in a
child process beside the asks, when it is refitted, and how failed trials enter its data."""
