"""How a point is proposed: the model's data, the GP fits, the initial design, rounding and
duplicates, the strategy call and its records; no I/O."""
