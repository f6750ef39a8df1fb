# puhti: CSC Puhti AI partition - 4x NVIDIA V100 32 GB per node, dual-rail HDR100 InfiniBand (compute retired 2026-07)
# Generated from recipes/sites/puhti.yaml by python -m builder render; do not edit.
# shellcheck shell=bash disable=SC2034,SC2016  # read by singularity_wrapper; $VARS stay literal
HPCML_SITE=puhti
HPCML_RUNTIME_PATH=/usr/bin/apptainer
HPCML_GPU_FLAG=--nv
HPCML_REQUIRES_JOB=1
HPCML_BINDS=(/users /projappl /scratch '$TMPDIR' '$LOCAL_SCRATCH')
HPCML_MULTI_NODE_BINDS=()
HPCML_MASTER_PORT_BASE=10000
