# Entry points. `make build` and `make test` do all set-up on a fresh machine.
PYTHON ?= python3
VENV   ?= .venv
TARGET ?= cpu
PY     := $(VENV)/bin/python
# `hpcml COMMAND` with the options on make's command line, by one rule (builder/cli/make_variables.py):
# --image-path X is IMAGE_PATH=X, a flag such as --tcl is TCL=1, --force=all is FORCE=all, a
# repeatable option a list (BIND="/scratch /projappl"). `hpcml COMMAND --help` lists them.
HPCML  := $(PY) -m builder.cli.make_variables
# Tests keep their compiled code (__pycache__/, ignored by git) even where the host turns that
# off: pytest rewrites every test module's asserts, and each `hpcml` a test starts compiles the
# builder, on every run (docs/performance.md).
PYTEST := PYTHONDONTWRITEBYTECODE= $(PY) -m pytest

.PHONY: setup setup-test render check lock test unit test-full test-rebuild test-bundle test-heavy test-gpu gpu-bundle build bundle smoke jobscript reframe publish sign export two-nodes doctor list show clean

# The builder's own Python environment: all that `make build` and the other image commands set
# up. Apptainer is the host's (or, for root, a toolbox under the cache) and debootstrap the host's
# or Debian's, fetched into the cache (docs/building.md#building-as-an-ordinary-user).
$(VENV)/.installed: pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || { echo \
		"error: $(PYTHON) is not Python 3.11 or newer; load a newer one (module load python) and pass it: make PYTHON=python3.11" >&2; exit 2; }
	$(PYTHON) -m venv $(VENV)
# BUNDLE=DIR: no network; the builder's own distributions from a source bundle, each by its sha256
ifdef BUNDLE
	$(VENV)/bin/pip install --quiet --no-index --find-links $(BUNDLE)/tools/python --require-hashes \
		-r $(BUNDLE)/tools/requirements.txt
	$(VENV)/bin/pip install --quiet --no-index --no-deps --no-build-isolation -e .
else
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e '.[test]'
endif
	touch $@

setup: $(VENV)/.installed

# What the tests run besides the builder: Slurm and munge, Lmod and Tcl modules, Open MPI with
# PMIx, QEMU, podman and its OCI tools, shellcheck. Debian packages, installed as root with apt;
# elsewhere the error lists the commands to provide.
setup-test: setup
	scripts/ensure-debian-packages shellcheck debootstrap slurmctld:slurm-wlm munged:munge \
		mpirun:openmpi-bin /usr/share/lmod/lmod/libexec/lmod:lmod tclsh:tcl \
		/usr/lib/$(shell uname -m)-linux-gnu/libpmix.so:libpmix-dev qemu-aarch64-static:qemu-user-static \
		openssl:openssl unsquashfs:squashfs-tools umoci:umoci skopeo:skopeo podman:podman runc:runc

render: setup
	$(PY) -m builder render --all

check: setup
	$(PY) -m builder check

# Resolves what each image's pip installs into recipes/locks/<target>/python.txt, then renders:
# every target whose sources answer here, or TARGET=cpu alone; UPDATE=1 resolves every step
# afresh (else only those whose recipe changed).
lock: setup
	$(HPCML) lock $(if $(filter command line,$(origin TARGET)),$(TARGET),--all)
	$(PY) -m builder render --all

# Two passes: first what `make unit` runs and the tests of real tools (marker `tools`), four at
# a time (no image, no cluster: they share nothing); then the tests that use the image,
# Apptainer or a Slurm cluster, in two streams side by side (tests/helpers/streams.py): one
# builds and packs images, the other runs them on clusters; each alone leaves a core idle for
# much of its time. Of a long matrix (every publish step killed, every site twin and launch)
# it runs representative cases; `make test-full` runs the rest. The second pass prints a line
# per test as it ends, so that a run cut short by a time limit still shows how far it came,
# and names its slowest files at the end.
test: setup-test
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m builder check
	$(PYTEST) -n 4 --dist worksteal -m "not heavy and not image and not cluster and not gpu and not full"
	$(PYTEST) -v -n 2 --streams -m "(image or cluster) and not heavy and not full"

# The rest of the long matrices (marker `full`): the publish steps, site twins, launches and
# framework examples make test leaves to one representative each (43 tests, 33 min on 2 cores),
# a cold `make build` as an ordinary user on a login node without apt (about 20 min more),
# the README's `pip install .` by pip itself (the other tests install the builder with uv's pip),
# the CPU image's top layer rebuilt with --force, the three slowest benches' quick runs, and
# the builds that only a new machine makes from nothing: the aarch64 test image with the cross
# compilers, and the site-image route's stand-in with its op compile.
test-full: setup-test
	$(PYTEST) -o console_output_style=times -m "full and not heavy"

# Two cold builds of the CPU image, each in a cache of its own: the same sha256, each layer too (part
# of test-full; docs/reproducibility.md#the-same-image-file-from-every-build).
test-rebuild: setup-test
	$(PYTEST) -o console_output_style=times -s tests/images/test_rebuild.py

# The CPU image built online, its source bundle made, and the image built again from it in a
# network namespace with no network, under another hostname, time zone, locale, umask,
# checkout path and CPU count, then by an ordinary user on the login twin; each must be
# the online build's file, byte for byte (part of test-full;
# docs/reproducibility.md#source-bundles-the-same-image-later-elsewhere-with-no-network).
test-bundle: setup-test
	$(PYTEST) -o console_output_style=times -s tests/images/test_bundle_rebuild.py

# The fast loop: lint, then every test that needs no image, Apptainer or Slurm cluster
# (markers set by tests/conftest.py from the fixtures a test uses), four at a time: most of
# them wait on a subprocess, not on a core. The tests of real tools (pip and uv installs, each
# documented command in a fresh shell: marker `tools`) are left to `make test`. Work
# stealing: a worker that runs out takes tests from the others, instead of waiting while one
# ends a long queue (docs/performance.md). Property tests draw a quarter of their examples here,
# all of them in `make test` (tests/helpers/property_share.py); of a matrix whose cases run one
# code path in a fresh process each, the representative cases (marker `broad` on the rest).
unit: $(VENV)/.installed
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	PROPERTY_SHARE=0.25 $(PYTEST) -q -n 4 --dist worksteal -m "not heavy and not image and not cluster and not gpu and not full and not tools and not broad"

# The heavy checks left out of `make test`: every CUDA image built for real and examined
# (hours on 2 cores; the layer and DeepSpeed-wheel caches make reruns short).
# HEAVY=a100-cuda picks targets (pytest -k).
test-heavy: setup-test
	$(PYTEST) -m heavy $(if $(HEAVY),-k "$(HEAVY)") tests/images/test_cuda_images.py

# Proves a CUDA target on a GPU host without Apptainer or network (docs/smoke.md): DeepSpeed's ops
# built as the image builds them, the smoke suite, every example on one GPU and resumed, and
# DeepSpeed's own tests of the promised ops, in GPU_BUDGET seconds; one summary at the end.
# Runs with the host's Python (GPU_PYTHON, torch and nvcc there) from what `make gpu-bundle` made
# beforehand where the recipes and a package index are. OPS=2/3 (or a list) tests part of the
# ops; DRY=1 needs no GPU: it checks the plan and prints each command.
GPU_PYTHON ?= python3
GPU_BUDGET ?= 540
test-gpu:
	$(GPU_PYTHON) -m pytest -p no:cacheprovider -m gpu tests/gpu --gpu-target "$(TARGET)" --gpu-budget "$(GPU_BUDGET)" \
		$(if $(OPS),--gpu-ops "$(OPS)") $(if $(DRY),--gpu-dry) $(if $(GPU_OUT),--gpu-out "$(GPU_OUT)")

# Writes .gpu-bundle/$(TARGET)/ for make test-gpu: the plan, the pinned DeepSpeed sdist, DeepSpeed's
# tests at its release (DEEPSPEED_TESTS= a tarball or GITDIR@REF instead of GitHub), the wheels the
# GPU host's Python (GPU_PYTHON_VERSION, default 3.12) lacks beyond torch, and libaio's packages.
GPU_PYTHON_VERSION ?= 3.12
gpu-bundle: setup-test
	PYTHONPATH=tests $(PY) -m helpers.gpu_bundle "$(TARGET)" --python-version "$(GPU_PYTHON_VERSION)" \
		$(if $(DEEPSPEED_TESTS),--deepspeed-tests "$(DEEPSPEED_TESTS)")

# Renders the target's layers and builds images/$(TARGET).sif (running its %test); where no
# apptainer or singularity is installed and we are root, provisions a toolbox first.
# FORCE=1 rebuilds the top layer even when up to date, FORCE=all every layer.
build: setup
	$(PY) -m builder render $(TARGET)
	$(HPCML) build $(TARGET)

# Runs the image's smoke suite here (building it first when stale): torchrun with one rank per
# GPU, two on a machine without GPUs; table and verdicts on the terminal, the JSON report and
# the plot in images/$(TARGET).smoke/.
smoke: build
	$(HPCML) smoke $(TARGET)

# Prints the Slurm batch script that runs ARGS in the image on the target's site (SITE, NODES,
# GPUS, LAUNCH=torchrun|srun|mpirun|deepspeed, TIME, ACCOUNT, QOS, OUT=FILE to write it). Only the
# script reaches stdout (`make jobscript ... > job.sh`): set-up and make's echo go to stderr.
jobscript:
	@$(MAKE) --no-print-directory setup >&2
	@$(HPCML) jobscript $(TARGET) -- $(ARGS)

# Writes the image's ReFrame checks for its site into OUT (SITE, NODES, ACCOUNT, TIME, ...;
# docs/reframe.md): reframe -C OUT/settings.py -c OUT/hpcml_checks.py -r
reframe: setup
	$(HPCML) reframe $(TARGET)

# Installs images/$(TARGET).sif as the module $(NAME)/$(VERSION) under $(PREFIX) (version
# default: <torch version>-<target>). Needs a passing smoke report of this very image (make
# smoke, or in a job on GPU nodes); DEFAULT=1 TCL=1 FORCE=1 SKIP_SMOKE=1 as needed.
# Every file a build of TARGET's locks fetches, checked, into bundles/$(TARGET) (OUT=DIR
# elsewhere); `make build BUNDLE=DIR` then builds from it with no network (docs/reproducibility.md).
bundle: setup
	$(HPCML) bundle $(TARGET)

publish: setup
	$(HPCML) publish $(TARGET)

# Signs images/$(TARGET).sif with the PEM private key KEY (before `make smoke`: the smoke
# report names the image it tested); `make publish KEY=public.pem` then checks it.
sign: setup
	$(HPCML) sign $(TARGET)

# Writes images/$(TARGET).sif, as built, in FORMAT for sites that run other containers (as root):
# oci (images/$(TARGET).oci.tar, for podman load and skopeo), enroot (images/$(TARGET).sqsh), edf
# (images/$(TARGET).toml, the CSCS Container Engine's file naming that squashfs; IMAGE_PATH= where
# it will be on the site, ${SCRATCH} kept as written); several comma-separated: FORMAT=oci,enroot,edf.
export: setup
	$(HPCML) export $(TARGET)

# A Slurm cluster of two nodes on this machine (network namespaces n1 and n2, as the tests
# use it), up until Enter; root only. Submit the scripts of `make jobscript SITE=local NODES=2`.
two-nodes: setup-test
	PYTHONPATH=tests $(PY) -m helpers.twonode_cluster

doctor: setup
	$(PY) -m builder doctor

list: setup
	$(PY) -m builder list

show: setup
	$(HPCML) show $(TARGET)

clean:
	rm -rf $(VENV) .pytest_cache
