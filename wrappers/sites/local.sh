# local: This kind of Linux box - no GPU; Apptainer, a single-node Slurm and Open MPI for tests
# Generated from recipes/sites/local.yaml by python -m builder render; do not edit.
# shellcheck shell=bash disable=SC2034,SC2016  # read by singularity_wrapper; $VARS stay literal
HPCML_SITE=local
HPCML_RUNTIME_PATH=''
HPCML_GPU_FLAG=''
HPCML_REQUIRES_JOB=0
HPCML_BINDS=('$TMPDIR')
HPCML_MULTI_NODE_BINDS=()
HPCML_MASTER_PORT_BASE=20000
