"""Research code beside effsearch, not part of the package it ships: the search-efficiency replay
(``research.replay``) that measured the default pruner, the recorders of its tables
(research/data) and their companions. research/README.md says what each is and how to run it."""
