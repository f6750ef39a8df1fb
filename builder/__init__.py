"""Render reproducible PyTorch + DeepSpeed Apptainer images from YAML recipes."""

__version__ = "0.1.0"
