"""Layer builds: each rendered layer built with Apptainer (or the toolbox), keyed and cached,
written atomically; the pip indexes a build may use."""
