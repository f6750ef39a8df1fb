# lumi: LUMI-G (CSC/EuroHPC, Kajaani) - 4x AMD MI250X per node seen as 8 GCDs, Slingshot-11
# Generated from recipes/sites/lumi.yaml by python -m builder render; do not edit.
# shellcheck shell=bash disable=SC2034,SC2016  # read by singularity_wrapper; $VARS stay literal
HPCML_SITE=lumi
HPCML_RUNTIME_PATH=/usr/bin/singularity
HPCML_GPU_FLAG=--rocm
HPCML_REQUIRES_JOB=0
HPCML_BINDS=(/pfs /scratch /projappl /project /flash /appl)
HPCML_MULTI_NODE_BINDS=(/var/spool/slurmd /opt/cray /usr/lib64/libcxi.so.1)
HPCML_MASTER_PORT_BASE=10000
