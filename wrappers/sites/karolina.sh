# karolina: IT4I Karolina accelerated partition - 8x NVIDIA A100 40 GB per node, InfiniBand HDR
# Generated from recipes/sites/karolina.yaml by python -m builder render; do not edit.
# shellcheck shell=bash disable=SC2034,SC2016  # read by singularity_wrapper; $VARS stay literal
HPCML_SITE=karolina
HPCML_RUNTIME_PATH=''
HPCML_GPU_FLAG=--nv
HPCML_REQUIRES_JOB=0
HPCML_BINDS=(/scratch /mnt)
HPCML_MULTI_NODE_BINDS=()
HPCML_MASTER_PORT_BASE=10000
