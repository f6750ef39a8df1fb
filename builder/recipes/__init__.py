"""Recipes: load the YAML, validate it against the schemas, merge targets, build the typed model."""
