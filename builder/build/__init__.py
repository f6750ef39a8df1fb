"""Build: layers with Apptainer (or the toolbox), keyed and cached, written atomically."""
