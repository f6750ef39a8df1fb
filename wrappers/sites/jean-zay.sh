# jean-zay: IDRIS Jean Zay A100 partition - 8x NVIDIA A100 80 GB per node, InfiniBand
# Generated from recipes/sites/jean-zay.yaml by python -m builder render; do not edit.
# shellcheck shell=bash disable=SC2034,SC2016  # read by singularity_wrapper; $VARS stay literal
HPCML_SITE=jean-zay
HPCML_RUNTIME_PATH=''
# the module that provides the runtime here, named when none is found
HPCML_RUNTIME_MODULE=singularity
HPCML_REQUIRES_JOB=1
HPCML_GPU_FLAG=--nv
HPCML_BINDS=('$WORK' '$SCRATCH' '$STORE' '$DSDIR')
# staged data (SING_STAGE) goes to the first of these that is set and exists
HPCML_STAGE_ROOTS=('$JOBSCRATCH')
HPCML_STAGE_IN_MEMORY=()
# folders of each job (scratch.make_dirs), made and handed over when no job script did
HPCML_JOB_DIRS=()
# on jobs of more than one node only
HPCML_MULTI_NODE_BINDS=()
HPCML_MULTI_NODE_ENV=()
HPCML_MULTI_NODE_LIBRARY_PATH=()
HPCML_MASTER_PORT_BASE=10000
# what the smoke suite judges runs here against (python -m smoke reads it at run time)
HPCML_SITE_FACTS='{"allreduce":[],"network":{"transport":"ib"},"site":"jean-zay","slurm_mpi":"pmix"}'
