"""Render: building blocks to Parts, Parts to Apptainer definitions; the site files and the runtime wheel."""
