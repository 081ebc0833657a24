"""The defenders: the recipes under audit (privaudit's zoo and a user's ``kind: python`` trainer), their specs,
info files and trained-model files. Modules are imported by name; the package exports nothing."""
