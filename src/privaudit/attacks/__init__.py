"""The attacks on trained models (LTU, the reference-model membership-inference attacks, the Game 3 label
guessers): scores that the audits turn into bounds. Modules are imported by name; the package exports nothing."""
