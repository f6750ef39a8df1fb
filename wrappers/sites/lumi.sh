# lumi: LUMI-G (CSC/EuroHPC, Kajaani) - 4x AMD MI250X per node seen as 8 GCDs, Slingshot-11
# Generated from recipes/sites/lumi.yaml by python -m builder render; do not edit.
# shellcheck shell=bash disable=SC2034,SC2016  # read by singularity_wrapper; $VARS stay literal
HPCML_SITE=lumi
HPCML_RUNTIME_PATH=/usr/bin/singularity
# the module that provides the runtime here, named when none is found
HPCML_RUNTIME_MODULE=''
HPCML_REQUIRES_JOB=0
HPCML_GPU_FLAG=--rocm
HPCML_BINDS=(/pfs /scratch /projappl /project /flash /appl)
# staged data (SING_STAGE) goes to the first of these that is set and exists
HPCML_STAGE_ROOTS=(/tmp)
HPCML_STAGE_IN_MEMORY=(/tmp)
# folders of each job (scratch.make_dirs), made and handed over when no job script did
HPCML_JOB_DIRS=('MIOPEN_USER_DB_PATH=/tmp/${USER}-${SLURM_JOB_ID:-nojob}-miopen-db' 'MIOPEN_CUSTOM_CACHE_DIR=/tmp/${USER}-${SLURM_JOB_ID:-nojob}-miopen-cache')
# on jobs of more than one node only
HPCML_MULTI_NODE_BINDS=(/var/spool/slurmd)
HPCML_MULTI_NODE_ENV=('NCCL_NET=AWS Libfabric' FI_CXI_RDZV_PROTO=alt_read FI_CXI_RDZV_EAGER_SIZE=0 FI_CXI_RDZV_THRESHOLD=0 FI_CXI_RDZV_GET_MIN=0)
HPCML_MULTI_NODE_LIBRARY_PATH=()
HPCML_MASTER_PORT_BASE=10000
# what the smoke suite judges runs here against (python -m smoke reads it at run time)
HPCML_SITE_FACTS='{"allreduce":[{"busbw_gbs":125,"bytes":134217728,"dtype":"float16","nodes":1,"source":"lumi-reframe-tests check_ddp_visualtransformer.py, rccl-tests all_reduce_perf, 8 GCDs","tolerance":0.05},{"busbw_gbs":85,"bytes":134217728,"dtype":"float16","nodes":2,"source":"lumi-reframe-tests rccl_test.py, 16 GCDs over Slingshot","tolerance":0.05}],"network":{"libfabric":"image","provider":"cxi","transport":"ofi"},"site":"lumi","slurm_mpi":"pmi2"}'
