# local: This kind of Linux box - no GPU; Apptainer, a single-node Slurm and Open MPI for tests
# Generated from recipes/sites/local.yaml by python -m builder render; do not edit.
# shellcheck shell=bash disable=SC2034,SC2016  # read by singularity_wrapper; $VARS stay literal
HPCML_SITE=local
HPCML_RUNTIME_PATH=''
# the module that provides the runtime here, named when none is found
HPCML_RUNTIME_MODULE=''
HPCML_REQUIRES_JOB=0
HPCML_GPU_FLAG=''
HPCML_BINDS=('$TMPDIR')
# staged data (SING_STAGE) goes to the first of these that is set and exists
HPCML_STAGE_ROOTS=('$TMPDIR')
HPCML_STAGE_IN_MEMORY=()
# folders of each job (scratch.make_dirs), made and handed over when no job script did
HPCML_JOB_DIRS=()
# on jobs of more than one node only
HPCML_MULTI_NODE_BINDS=()
HPCML_MULTI_NODE_ENV=()
HPCML_MULTI_NODE_LIBRARY_PATH=()
HPCML_MASTER_PORT_BASE=20000
# what the smoke suite judges runs here against (python -m smoke reads it at run time)
HPCML_SITE_FACTS='{"allreduce":[{"busbw_gbs":0.6,"bytes":67108864,"dtype":"float32","nodes":1,"source":"this project'"'"'s CI VM (2 cores), gloo over loopback, 2 ranks, 2026-11","tolerance":0.8}],"network":{"transport":"socket"},"site":"local","slurm_mpi":"none"}'
