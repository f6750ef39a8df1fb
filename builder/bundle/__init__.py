"""A target's source bundle: every file a build of its lock fetches, kept beside the image so
that it can be rebuilt later, elsewhere, with no network (docs/reproducibility.md)."""
