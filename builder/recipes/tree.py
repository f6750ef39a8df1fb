"""Load a recipe tree (sites, targets, versions, DeepSpeed ops), check it, resolve targets."""

import re
from pathlib import Path

from ..errors import RecipeError
from ..suggest import did_you_mean
from . import validate, yamlsrc
from .merge import Origin, merge
from .model import Account, CudaToolkit, DeepSpeed, Partition, Qos, Site, Source, Stage, Target

NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")
FLAVOUR_VENDOR = {"cuda": "nvidia", "rocm": "amd"}
FLAVOUR_COMM = {"cpu": "gloo", "cuda": "nccl", "rocm": "rccl"}
VENDOR_ARCH = {"nvidia": "sm_", "amd": "gfx"}
# The image's own libfabric with the CXI (Slingshot) provider, in build order; each a source
# in versions.yaml
CXI_STACK = ("cassini-headers", "cxi-driver", "libcxi", "libfabric")
BUILD_TOOLS = ("setuptools", "wheel", "ninja")   # DeepSpeed builds with --no-build-isolation


class SiteBroken(Exception):
    """A target names a site whose file is broken (RecipeTree.broken_sites has its error)."""


class RecipeTree:
    """Everything under one recipes directory, loaded and checked at construction.

    A broken site file does not stop the rest: its error is kept in ``broken_sites`` and
    raised for the targets that use it (``unusable``), by ``target()``, ``site()`` and
    ``require_all_valid()`` (check, render --all).
    """

    def __init__(self, root):
        self.root = str(root)
        base = Path(root)
        if not base.is_dir():
            raise RecipeError("recipes directory not found; expected a directory holding "
                              "sites/, targets/ and versions.yaml", file=self.root)
        self.versions = self._load("versions.yaml", "versions")
        self.ds_ops = self._load("deepspeed-ops.yaml", "deepspeed-ops")
        self.sites, self.broken_sites = {}, {}
        for name, loaded in self._folder("sites", "site", keep_errors=True).items():
            try:
                if isinstance(loaded, RecipeError):
                    raise loaded
                self.sites[name] = self._site(loaded)
            except RecipeError as error:
                self.broken_sites[name] = error
        docs = self._folder("targets", "target", partial=True)
        self.target_docs = {name: doc for name, doc in docs.items() if "alias_of" not in doc.data}
        self.aliases = {name: self._alias(doc) for name, doc in docs.items() if "alias_of" in doc.data}
        self.targets, self.unusable = {}, {}
        for name in self.target_docs:
            try:
                self.targets[name] = self._target(name)
            except SiteBroken as broken:
                self.unusable[name] = broken.args[0]

    # --- files -------------------------------------------------------------------------
    def _shown(self, *parts):
        return str(Path(self.root, *parts))

    def _load(self, relative, schema_name, partial=False):
        path = Path(self.root, relative)
        if not path.is_file():
            raise RecipeError(f"missing file; expected {relative} in the recipes directory",
                              file=self._shown(relative))
        doc = yamlsrc.load(path, self._shown(relative))
        validate.check(doc, doc.data, schema_name, partial)
        return doc

    def _folder(self, folder, schema_name, partial=False, keep_errors=False):
        """name: document for each recipe file; with keep_errors, a file that does not load
        or validate maps to its RecipeError instead of stopping the rest."""
        directory = Path(self.root, folder)
        if not directory.is_dir():
            raise RecipeError(f"missing directory; expected {folder}/ in the recipes directory",
                              file=self._shown(folder))
        docs = {}
        for path in sorted(directory.iterdir()):
            if path.name.startswith(".") or path.suffix not in (".yaml", ".yml", ".json"):
                continue
            if path.suffix != ".yaml":
                raise RecipeError("unexpected file; recipes end in .yaml",
                                  file=self._shown(folder, path.name))
            if not NAME.match(path.stem):
                raise RecipeError("bad file name; expected lower-case letters, digits and "
                                  "dashes, such as puhti-cuda.yaml", file=self._shown(folder, path.name))
            try:
                docs[path.stem] = self._load(f"{folder}/{path.name}", schema_name, partial)
            except RecipeError as error:
                if not keep_errors:
                    raise
                docs[path.stem] = error
        if not docs:
            raise RecipeError(f"no recipes found; expected {folder}/<name>.yaml files",
                              file=self._shown(folder))
        return docs

    # --- sites ---------------------------------------------------------------------------
    def _site(self, doc):
        data = doc.data
        name = Path(doc.file).stem
        gpu = data["gpu"]
        archs = tuple(gpu.get("arch", ()))
        prefix = VENDOR_ARCH.get(gpu["vendor"])
        for index, arch in enumerate(archs):
            if prefix is None or not arch.startswith(prefix):
                expected = f"{prefix}* archs" if prefix else "no arch for a site without GPUs"
                raise doc.error(("gpu", "arch", index),
                                f"arch {arch!r} does not fit vendor {gpu['vendor']}; expected {expected}")
        if prefix and not archs:
            raise doc.error(("gpu",), f"missing required key 'arch' for a {gpu['vendor']} GPU")
        wavefront = gpu.get("wavefront_size", 0)
        if gpu["vendor"] == "amd" and not wavefront:
            raise doc.error(("gpu",), "missing required key 'wavefront_size' for an amd GPU; "
                                      "expected 64 for CDNA (gfx90a, gfx942) or 32 for RDNA")
        if wavefront and gpu["vendor"] != "amd":
            raise doc.error(("gpu", "wavefront_size"), "wavefront_size is an AMD setting; "
                                                       f"expected none for vendor {gpu['vendor']}")
        network = dict(data.get("network", {}))
        libfabric = network.get("libfabric", "")
        host_libfabric = network.get("host_libfabric", {})
        if libfabric == "host" and not host_libfabric:
            raise doc.error(("network",), "libfabric: host needs host_libfabric (its binds and "
                                          "library_path); expected both")
        if host_libfabric and not libfabric:
            raise doc.error(("network", "host_libfabric"), "host_libfabric without libfabric; "
                                                           "expected libfabric: image or host")
        if libfabric and network.get("transport") != "ofi":
            raise doc.error(("network", "libfabric"), "libfabric is an ofi setting; expected "
                                                      f"transport: ofi, found {network.get('transport')}")
        cpu, runtime, scratch = data["cpu"], data["runtime"], data.get("scratch", {})
        multi, launcher, slurm = data.get("multi_node", {}), data.get("launcher", {}), data.get("slurm", {})
        modules = data.get("modules", {})
        return Site(
            name=name, description=data["description"], gpu_vendor=gpu["vendor"],
            gpu_model=gpu.get("model", ""), archs=archs, wavefront_size=wavefront,
            gpus_per_node=gpu["per_node"],
            cores_per_node=cpu["cores_per_node"], cores_per_gpu=cpu.get("cores_per_gpu", 0),
            mem_per_gpu_gb=cpu.get("mem_per_gpu_gb", 0), cpu_bind=cpu.get("cpu_bind", ""),
            runtime=runtime["command"], runtime_path=runtime.get("path", ""),
            runtime_module=runtime.get("module", ""), image_dir=runtime.get("image_dir", ""),
            image_copy=runtime.get("image_copy", ""),
            modules_purge=modules.get("purge", False), modules_load=tuple(modules.get("load", ())),
            requires_job=runtime.get("requires_job", False),
            binds=tuple(data["binds"]), tmpdir=scratch.get("tmpdir", ""),
            node_local=scratch.get("node_local", ""), env=_pairs(data.get("env", {})),
            multi_node_binds=tuple(multi.get("binds", ())),
            multi_node_env=_pairs(multi.get("env", {})),
            multi_node_library_path=tuple(multi.get("library_path", ())),
            mpi_abi=data["mpi"]["abi"], mpi_host=data["mpi"].get("host", ""),
            mpi_host_module=data["mpi"].get("host_module", ""),
            slurm_mpi=data["mpi"]["slurm_mpi"],
            launcher_default=launcher.get("default", "torchrun"),
            master_port_base=launcher.get("master_port_base", 10000),
            account=_account(doc, slurm.get("account")),
            gpu_request=slurm.get("gpu_request", "gres"), gres_type=slurm.get("gres_type", ""),
            mem_rule=slurm.get("mem", "none"), qos=_qos(slurm.get("qos", ())),
            constraint=slurm.get("constraint", ""), sbatch_extra=tuple(slurm.get("sbatch", ())),
            partitions=tuple(Partition(name, p["max_nodes"], p["max_time"],
                                       p.get("max_gpus", gpu["per_node"]),
                                       p.get("whole_nodes", False), p.get("test", False),
                                       p.get("note", ""))
                             for name, p in slurm.get("partitions", {}).items()),
            network={key: value for key, value in network.items() if key != "host_libfabric"},
            libfabric=libfabric, host_libfabric_binds=tuple(host_libfabric.get("binds", ())),
            host_libfabric_library_path=tuple(host_libfabric.get("library_path", ())),
            allreduce=tuple(data.get("allreduce", ())),
            notes=tuple(data.get("notes", ())), retired=data.get("retired", ""), data=data)

    # --- targets -------------------------------------------------------------------------
    def _alias(self, doc):
        """Another name for a target's image (a retired machine's target, kept so that its
        commands still build the image that now serves its GPUs)."""
        extra = sorted(set(doc.data) - {"alias_of", "description"})
        if extra:
            raise doc.error((extra[0],), f"an alias takes only alias_of and description; "
                                         f"found {extra[0]!r}")
        real = doc.data["alias_of"]
        if real not in self.target_docs:
            raise doc.error(("alias_of",), f"unknown target {real!r}; expected one of the targets "
                                           f"that are not aliases: {', '.join(sorted(self.target_docs))}")
        return real

    def _merged(self, name, chain=()):
        doc = self.target_docs[name]
        own = {key: value for key, value in doc.data.items() if key != "extends"}
        base = doc.data.get("extends")
        if base is None:
            return own, Origin(doc)
        if base == name or base in chain:
            loop = " -> ".join(chain + (name, base))
            raise doc.error(("extends",), f"targets extend each other in a loop: {loop}")
        if base in self.aliases:
            raise doc.error(("extends",), f"{base!r} is an alias of {self.aliases[base]!r}; "
                                          f"expected the target itself")
        if base not in self.target_docs:
            raise doc.error(("extends",), f"unknown target {base!r} (expected one of: "
                                          f"{', '.join(sorted(self.target_docs))})")
        base_data, origin = self._merged(base, chain + (name,))
        return merge(base_data, origin, own, doc), origin

    def _target(self, name):
        data, origin = self._merged(name)
        doc = self.target_docs[name]
        validate.check(yamlsrc.Document(doc.file, data, doc.lines), data, "target", origin=origin)
        versions = self.versions.data

        sites = []
        for index, site_name in enumerate(data["sites"]):
            if site_name in self.broken_sites:
                raise SiteBroken(self.broken_sites[site_name])
            if site_name not in self.sites:
                raise origin.error(("sites", index), f"unknown site {site_name!r} (expected one "
                                   f"of: {', '.join(sorted(self.sites))}){did_you_mean(site_name, self.sites)}")
            sites.append(self.sites[site_name])

        flavour = data["torch"]["flavour"]
        vendor = FLAVOUR_VENDOR.get(flavour)
        for index, site in enumerate(sites):
            if vendor and site.gpu_vendor != vendor:
                raise origin.error(("sites", index), f"site {site.name!r} has {site.gpu_vendor} "
                                   f"GPUs; a {flavour} image needs {vendor} GPUs")
            if site.mpi_abi != data["mpi"]["abi"]:
                raise origin.error(("mpi", "abi"), f"site {site.name!r} runs {site.mpi_abi}; "
                                   f"expected the image's MPI to match it, found {data['mpi']['abi']}")
        if data["comm"]["library"] != FLAVOUR_COMM[flavour]:
            raise origin.error(("comm", "library"), f"a {flavour} image uses "
                               f"{FLAVOUR_COMM[flavour]}; found {data['comm']['library']}")
        plugin = None
        plugin_name = data["comm"].get("plugin", "none")
        if plugin_name != "none":
            if flavour == "cpu":
                raise origin.error(("comm", "plugin"), "a network plugin needs nccl or rccl; "
                                                       "a cpu image uses gloo")
            plugin = self._source(name, plugin_name)
        libfabric = ()
        if data["comm"].get("libfabric", "distro") == "cxi":
            if plugin is None:
                raise origin.error(("comm", "libfabric"), "libfabric: cxi is what the network "
                                   "plugin uses; expected a plugin (aws-ofi-nccl) beside it")
            libfabric = tuple(self._source(name, part) for part in CXI_STACK)
        for site in sites:
            if site.libfabric == "image" and not libfabric:
                raise origin.error(("comm",), f"site {site.name!r} runs multi-node jobs on the "
                                   f"image's own libfabric; expected comm.libfabric: cxi")
        wavefronts = {}
        for site in sites:
            wavefronts.setdefault(site.wavefront_size, site.name)
        if len(wavefronts) > 1:
            raise origin.error(("sites",), f"sites {' and '.join(wavefronts.values())} have GPUs "
                               f"of different wavefront sizes ({' and '.join(map(str, wavefronts))}); "
                               f"expected one image per wavefront size")

        stages = tuple(self._stage(origin, data, stage) for stage in ("build", "final"))
        extras = []
        for index, package in enumerate(data["python"].get("packages", [])):
            extras.append((package, self._pin(origin, ("python", "packages", index), package)))
        tools = tuple((tool, self._pin(origin, ("python",), tool)) for tool in BUILD_TOOLS)
        deepspeed = self._deepspeed(origin, data, flavour, sites)
        mpi4py = ""
        if data["mpi"].get("mpi4py", True):
            mpi4py = self._pin(origin, ("mpi", "mpi4py"), "mpi4py")
        # a target may pin its own torch: the release whose wheels carry its GPUs' archs
        torch_version = str(data["torch"].get("version")
                            or versions.get("torch_by_flavour", {}).get(flavour)
                            or self._pin(origin, ("torch",), "torch"))
        index = versions["torch_index"].get(flavour, "")
        kit = self._cuda_toolkit(origin, data, flavour)
        components = tuple(data["os"].get("components", ("main",)))
        if components != ("main",) and data["os"]["family"] != "debian":
            raise origin.error(("os", "components"), "archive areas are a Debian setting; "
                                                     f"expected none for {data['os']['family']}")

        target = Target(
            name=name, description=data["description"], sites=tuple(sites), stages=stages,
            os_family=data["os"]["family"], os_components=components,
            packages_build=tuple(data["os"].get("packages", {}).get("build", ())),
            packages_final=tuple(data["os"].get("packages", {}).get("final", ())),
            venv=data["python"].get("venv", "/opt/venv"), build_tools=tools,
            python_packages=tuple(extras), frameworks=self._frameworks(data, flavour),
            torch_flavour=flavour, torch_version=torch_version, torch_index=index,
            cuda_min_driver=tuple(sorted(versions.get("cuda_min_driver", {}).items()))
            if flavour == "cuda" else (), cuda_toolkit=kit,
            deepspeed=deepspeed, comm_library=data["comm"]["library"], plugin=plugin,
            libfabric=libfabric,
            mpi_abi=data["mpi"]["abi"], mpi4py_version=mpi4py,
            build_space=tuple(sorted(data.get("build_space", {}).items())))
        return target

    @staticmethod
    def _cuda_toolkit(origin, data, flavour):
        spec = data.get("cuda_toolkit")
        if flavour != "cuda":
            if spec:
                raise origin.error(("cuda_toolkit",), f"a {flavour} image has no CUDA toolkit; "
                                                      f"expected cuda_toolkit only with torch flavour cuda")
            return None
        if not spec:
            raise origin.error(("torch",), "a cuda image needs cuda_toolkit (from: pypi with its "
                                           "version, or from: debian) for the DeepSpeed ops")
        if spec["from"] == "pypi" and not spec.get("version"):
            raise origin.error(("cuda_toolkit",), "missing version; expected the cuda-toolkit "
                                                  "release torch pins, such as 13.0.3")
        if spec["from"] == "debian" and "non-free" not in data["os"].get("components", ()):
            raise origin.error(("os",), "Debian's nvidia-cuda-toolkit is in non-free; expected "
                                        "os.components to include non-free")
        return CudaToolkit(spec["from"], spec.get("version", ""), spec.get("gcc", ""))

    def _source(self, target, name):
        source = self.versions.data["sources"].get(name)
        if source is None:
            raise self.versions.error(("sources",), f"missing source '{name}' that target "
                                                    f"{target!r} uses")
        return Source(name, str(source["version"]), source["git"], source["commit"])

    def _frameworks(self, data, flavour):
        """The frameworks' pins when the recipe wants them (GPU images do unless they say no)."""
        if not data["python"].get("frameworks", flavour != "cpu"):
            return ()
        return tuple((name, str(version)) for name, version in self.versions.data["frameworks"].items())

    def _pin(self, origin, path, package):
        pins = self.versions.data["python_packages"]
        if package not in pins:
            raise origin.error(path, f"no pinned version for {package!r}; expected an entry "
                                     f"under python_packages in {self.versions.file}")
        return str(pins[package])

    def _stage(self, origin, data, name):
        stage = data["stages"][name]
        image = stage["image"]
        if stage["bootstrap"] != "localimage":
            images = self.versions.data["images"]
            if image not in images:
                raise origin.error(("stages", name, "image"), f"unknown image {image!r}; expected "
                                   f"one of the images in {self.versions.file}: {', '.join(sorted(images))}")
            image = images[image]
        return Stage(name, stage["bootstrap"], image)

    def _deepspeed(self, origin, data, flavour, sites):
        """Every op DeepSpeed has for the image's accelerator is prebuilt, unless skipped with a reason."""
        spec = data["deepspeed"]
        table = self.ds_ops.data["ops"]
        wanted_accel = "cpu" if flavour == "cpu" else "cuda"
        if spec["accelerator"] != wanted_accel:
            raise origin.error(("deepspeed", "accelerator"), f"a {flavour} image builds DeepSpeed "
                               f"ops for accelerator {wanted_accel}; found {spec['accelerator']}")
        # ROCm torch runs DeepSpeed's cuda accelerator: ds_report lists the cuda ops there too
        listed_for = {"cpu"} if flavour == "cpu" else {"cuda", "rocm"}
        listed = sorted(op for op, facts in table.items() if listed_for & set(facts["accelerators"]))
        buildable = [op for op in listed
                     if flavour in table[op]["accelerators"] and not table[op].get("placeholder")]
        skip = spec.get("skip", {})
        for op in skip:
            if op not in buildable:
                why = ("is not a DeepSpeed op" if op not in table else
                       "is a placeholder that is never prebuilt" if table[op].get("placeholder") else
                       f"is not built for {flavour} images anyway")
                raise origin.error(("deepspeed", "skip", op), f"{op!r} {why}; expected one of the "
                                   f"ops in {self.ds_ops.file} a {flavour} image prebuilds: "
                                   f"{', '.join(o for o in buildable if o not in skip)}")
        promised = [op for op in buildable if op not in skip]
        sms = [int(arch[3:]) for site in sites for arch in site.archs if arch.startswith("sm_")]
        for op in promised:
            if sms and "min_sm" in table[op] and min(sms) < table[op]["min_sm"]:
                raise origin.error(("deepspeed",), f"op {op!r} needs sm_{table[op]['min_sm']} or "
                                   f"newer and this image also targets sm_{min(sms)}; expected "
                                   f"it under deepspeed.skip with the reason")
        packages = sorted({pkg for op in promised for pkg in table[op].get("packages", ())})
        return DeepSpeed(
            version=self._pin(origin, ("deepspeed",), "deepspeed"), accelerator=spec["accelerator"],
            switches=tuple(sorted((table[op]["build_var"], "1" if op in promised else "0")
                                  for op in listed)),
            listed=tuple(listed), promised=tuple(promised),
            skipped=tuple(sorted(skip.items())), packages=tuple(packages),
            fix_master_address=spec.get("fix_master_address", True))

    def target(self, name):
        name = self.aliases.get(name, name)
        if name in self.unusable:
            error = self.unusable[name]
            raise RecipeError(f"{error.message} (target {name} runs on this site)",
                              file=error.file, line=error.line, path=error.path)
        if name not in self.targets:
            known = {*self.targets, *self.aliases}
            raise RecipeError(f"unknown target {name!r} (expected one of: {', '.join(sorted(known))})"
                              + did_you_mean(name, known), file="command line")
        return self.targets[name]

    def site(self, name):
        """A site by the name given on the command line."""
        if name in self.broken_sites:
            raise self.broken_sites[name]
        if name not in self.sites:
            raise RecipeError(f"unknown site {name!r}; expected one of: {', '.join(sorted(self.sites))}"
                              + did_you_mean(name, self.sites), file="command line")
        return self.sites[name]

    def require_all_valid(self):
        """The first broken site file's error, for commands that need every recipe."""
        for name in sorted(self.broken_sites):
            raise self.broken_sites[name]

    def parent(self, name):
        """The target `name` extends, or None."""
        return self.target_docs[self.target(name).name].data.get("extends")


def _account(doc, spec):
    if not spec:
        return None
    try:
        re.compile(spec["pattern"])
    except re.error as error:
        raise doc.error(("slurm", "account", "pattern"), f"not a regular expression ({error}); "
                        "expected the form of the site's projects, such as '^project_[0-9]{9}$'") from None
    if not re.fullmatch(spec["pattern"], spec["example"]):
        raise doc.error(("slurm", "account", "example"), f"{spec['example']!r} does not match the "
                        f"pattern {spec['pattern']!r}; expected an example of the site's form")
    return Account(spec["example"], spec["pattern"], spec.get("required", False))


def _qos(spec) -> tuple:
    return tuple(Qos(q["name"], q.get("max_time", ""), q.get("max_gpus", 0), q.get("test", False))
                 for q in spec)


def _pairs(mapping) -> tuple:
    """((name, value as text), ...) in file order: environment variables."""
    return tuple((name, str(value)) for name, value in mapping.items())
