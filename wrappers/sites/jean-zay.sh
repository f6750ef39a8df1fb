# jean-zay: IDRIS Jean Zay A100 partition - 8x NVIDIA A100 80 GB per node, InfiniBand
# Generated from recipes/sites/jean-zay.yaml by python -m builder render; do not edit.
# shellcheck shell=bash disable=SC2034,SC2016  # read by singularity_wrapper; $VARS stay literal
HPCML_SITE=jean-zay
HPCML_RUNTIME_PATH=''
HPCML_GPU_FLAG=--nv
HPCML_REQUIRES_JOB=1
HPCML_BINDS=('$WORK' '$SCRATCH' '$STORE' '$DSDIR')
HPCML_MULTI_NODE_BINDS=()
HPCML_MASTER_PORT_BASE=10000
