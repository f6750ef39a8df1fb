"""`hpcml export TARGET --format oci|enroot|edf`: a built image in the format another site runs,
made from the SIF's own root filesystem so every format holds the image's bytes.

- `sif.py`: the SIF's root filesystem partition: where it is, one file read from it, all of it
  unpacked;
- `metadata.py`: what the formats carry besides files: the image's environment and labels, its
  build date, the annotations they map to;
- `oci.py`: the OCI image archive (umoci);
- `enroot.py`: the enroot squashfs (mksquashfs), with the environment where enroot reads it;
- `edf.py`: the CSCS Container Engine's EDF (TOML) naming that squashfs;
- `write.py`: the command: checks, the order of the formats, atomic placement.
"""
