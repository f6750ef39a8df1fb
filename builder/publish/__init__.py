"""Publish: a built, smoke-tested image as a site module, and checks of what was published."""
