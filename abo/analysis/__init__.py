"""Understanding a study: what its trials add up to (best, front, sources), what the GP says
(importance, cross-validation, contours), plots, and a table of its trials."""
