# karolina: IT4I Karolina accelerated partition - 8x NVIDIA A100 40 GB per node, InfiniBand HDR
# Generated from recipes/sites/karolina.yaml by python -m builder render; do not edit.
# shellcheck shell=bash disable=SC2034,SC2016  # read by singularity_wrapper; $VARS stay literal
HPCML_SITE=karolina
HPCML_RUNTIME_PATH=''
# the module that provides the runtime here, named when none is found
HPCML_RUNTIME_MODULE=''
HPCML_REQUIRES_JOB=0
HPCML_GPU_FLAG=--nv
HPCML_BINDS=(/scratch /mnt)
# staged data (SING_STAGE) goes to the first of these that is set and exists
HPCML_STAGE_ROOTS=()
HPCML_STAGE_IN_MEMORY=()
# folders of each job (scratch.make_dirs), made and handed over when no job script did
HPCML_JOB_DIRS=()
# on jobs of more than one node only
HPCML_MULTI_NODE_BINDS=()
HPCML_MULTI_NODE_ENV=()
HPCML_MULTI_NODE_LIBRARY_PATH=()
HPCML_MASTER_PORT_BASE=10000
# what the smoke suite judges runs here against (python -m smoke reads it at run time)
HPCML_SITE_FACTS='{"allreduce":[{"busbw_gbs":66,"bytes":1073741824,"dtype":"float32","nodes":2,"source":"cscs-reframe-tests xccl_tests.py, A100 two-node all_reduce 1 GiB (CSCS nodes; a reference, not Karolina'"'"'s own)","tolerance":0.1}],"network":{"transport":"ib"},"site":"karolina","slurm_mpi":"none"}'
