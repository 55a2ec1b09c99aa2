"""A study's definition, checked once: ``StudySpec`` (space, outcomes, strategy and options),
the checks of each group of options, the comparison of given with stored options, and the
sources of a warm start."""

from abo.spec.study_spec import StudySpec as StudySpec
