"""Running evaluations: the loop that keeps the workers busy (a state machine and its
driver), the objective's reports, progress, signals, shell commands and the trial budget."""
