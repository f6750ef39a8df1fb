# mahti: CSC Mahti GPU partition - 4x NVIDIA A100 40 GB per node, HDR200 InfiniBand (being decommissioned in 2026)
# Generated from recipes/sites/mahti.yaml by python -m builder render; do not edit.
# shellcheck shell=bash disable=SC2034,SC2016  # read by singularity_wrapper; $VARS stay literal
HPCML_SITE=mahti
HPCML_RUNTIME_PATH=/usr/bin/apptainer
HPCML_GPU_FLAG=--nv
HPCML_REQUIRES_JOB=1
HPCML_BINDS=(/users /projappl /scratch '$TMPDIR' '$LOCAL_SCRATCH')
HPCML_MULTI_NODE_BINDS=()
HPCML_MASTER_PORT_BASE=10000
