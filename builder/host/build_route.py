"""Which way this host lets `build` run, told before a build writes anything (issue 51): one
class per route, each owning its flags and its Apptainer command line, so the rest of the
builder asks the route and never names it.

Sites differ: root on a workstation or CI runner; `--fakeroot` on a login node, with user
namespaces (Jean Zay's prepost nodes) or, where a setuid Apptainer maps a subuid range,
without them (Roihu: CSC's containers overview, as recipes/sites/roihu.yaml cites it);
neither on LUMI, where SingularityCE (3.11 and later) builds without privilege when `proot`
is on PATH (CSC's guide to containers on LUMI: `module load LUMI systools`). With Apptainer
there, or any runtime, and a proot that translates statx (5.2 and later), the builder runs
the definition's steps itself under proot in an unpacked image (`unpacked`, as cotainr
does; layerbuild/unpacked.py). Both build only from an image (`Bootstrap: localimage`), so
they take the targets on a site's own image (lumi-laif); a Debian root needs root or
--fakeroot. A root whose capability bounding set lacks CAP_SYS_RESOURCE builds with
--fakeroot too: %post fails without it.

`route_facts.facts()` reads the host; `decide(facts)` is pure, so each case is tested
without the host. A new route is a class here, its line in `decide`, and its test.

Example: decide(Facts(root=False, apptainer="/usr/bin/apptainer", userns=True, subids=True,
setuid=False, fakeroot_command=False)) -> Fakeroot("/usr/bin/apptainer --fakeroot: user
namespace with ...")
"""

from dataclasses import dataclass
from typing import ClassVar

from ..errors import SetupError
from .route_facts import Facts, facts

PROOT_NOTE = (
    "where SingularityCE 3.11+ is the runtime, proot on PATH lets it build a target on a site's image "
    "without privilege (on LUMI: module load LUMI systools); cotainr is the other way: "
    "docs/lumi.md#lumi-on-the-sites-own-image"
)
NO_CAP = "needed: no CAP_SYS_RESOURCE in the capability bounding set"


@dataclass(frozen=True)
class Route:
    """A way to build here. Subclasses set the class facts; `fakeroot` is decided once, in
    `decide`, for the routes where it depends on the host."""

    detail: str  # how, for doctor's row
    fakeroot: bool = False  # Apptainer's --fakeroot
    name: ClassVar[str | None] = None  # for people: progress lines, doctor, the SBOM's build facts
    under: ClassVar[str] = ""  # how a build's progress line says it runs, where not plainly Apptainer
    unprivileged: ClassVar[bool] = False  # builds only from a site's image; on LUMI, in a Slurm job
    runs_steps: ClassVar[bool] = False  # the builder runs the definition's steps, not `apptainer build`
    proot_probe: ClassVar[bool] = False  # Apptainer runs no image here: the SBOM probes under proot

    def build_argv(self, apptainer, build_args: dict, binds: list, built, definition, squashfs_args=()) -> list:
        """`apptainer build` of ``definition`` into ``built``: ``binds`` as Apptainer writes
        them (SOURCE:DEST[:ro]), ``squashfs_args`` where this Apptainer takes them."""
        argv = [str(apptainer), "build"]
        argv += ["--mksquashfs-args", " ".join(squashfs_args)] if squashfs_args else []
        argv += ["--fakeroot"] if self.fakeroot else []
        for arg, value in sorted(build_args.items()):
            argv += ["--build-arg", f"{arg}={value}"]
        for bind in binds:
            argv += ["--bind", bind]
        return argv + [str(built), str(definition)]

    def fakeroot_row(self) -> str:
        """doctor's `fakeroot` row."""
        return "not needed"


class Root(Route):
    name = "root"

    def fakeroot_row(self) -> str:
        return NO_CAP if self.fakeroot else "not needed"


class Toolbox(Root):
    name = "toolbox"


@dataclass(frozen=True)
class Fakeroot(Route):
    fakeroot: bool = True
    name = "fakeroot"

    def fakeroot_row(self) -> str:
        return "needed: not root"


class Proot(Route):
    """SingularityCE builds under proot only when --fakeroot is not given."""

    name = "proot"
    under = ", under proot"
    unprivileged = True


class Unpacked(Route):
    name = "unpacked"
    under = " and proot, without privilege (the builder runs the steps)"
    unprivileged = True
    runs_steps = True
    proot_probe = True


@dataclass(frozen=True)
class NoRoute(Route):
    blocker: str = ""  # one line: what is missing and what the site must provide


def decide(facts: Facts) -> Route:
    if facts.apptainer is None:
        if facts.toolbox_ready and facts.root:
            return Toolbox("the toolbox's Apptainer, as root (no Apptainer installed)", not facts.cap_sys_resource)
        if facts.toolbox_reason is None:
            how = "no Apptainer installed: `build` provisions a toolbox under the cache (root)"
            return Toolbox(how, not facts.cap_sys_resource)
        return NoRoute(
            "no Apptainer",
            blocker="no apptainer or singularity on PATH: load the site's module (module load apptainer) or have "
            f"Apptainer 1.1+ installed; {facts.toolbox_reason}",
        )
    if facts.root:
        return Root(f"{facts.apptainer} as root", not facts.cap_sys_resource)
    if facts.subids and (facts.userns or facts.setuid):
        how = "user namespace" if facts.userns else "setuid starter"
        return Fakeroot(f"{facts.apptainer} --fakeroot: {how} with this user's /etc/subuid range")
    if facts.userns:
        helper = " and the fakeroot command" if facts.fakeroot_command else " (no fakeroot command: some may fail)"
        return Fakeroot(f"{facts.apptainer} --fakeroot: a one-ID user namespace{helper}; no /etc/subuid range")
    if facts.proot_builds and facts.proot:
        return Proot(f"{facts.apptainer} under {facts.proot}, no privilege: targets on a site's image only")
    if facts.proot and facts.proot_statx:
        return Unpacked(
            f"no privilege: the builder unpacks the site's image into your folder and runs the steps under "
            f"{facts.proot}, packing with {facts.apptainer}; targets on a site's image only"
        )
    detail, blocker = _blocked(facts)
    return NoRoute(detail, blocker=blocker)


def _blocked(facts: Facts) -> tuple:
    """(detail, blocker) of a host with a runtime but no way to build."""
    if facts.proot:
        return (
            f"{facts.apptainer}, no user namespaces, {facts.proot} too old",
            f"this host lets you build no image yet: {facts.proot} does not translate statx (proot before 5.2), "
            "so the image's own ls and cp would see this host's files; put proot 5.2 or newer first on PATH",
        )
    if facts.proot_builds:
        return (
            f"{facts.apptainer}, no user namespaces, no proot",
            "this host lets you build no image yet: SingularityCE builds without privilege when proot is on "
            "PATH; load it (on LUMI: module load LUMI systools) and retry",
        )
    return (
        f"{facts.apptainer}, no user namespaces",
        "this host lets you build no image: Apptainer's --fakeroot needs unprivileged user namespaces "
        "(sysctl user.max_user_namespaces > 0) or a setuid Apptainer with a /etc/subuid range for you; "
        f"ask the site for either, or build elsewhere and copy the image; {PROOT_NOTE}",
    )


def check(site=None, target=None) -> Route:
    """The route, or one line (exit status 2) before anything is written when there is none,
    or when ``target`` (a name, with ``site_image`` its recipe's) cannot take it."""
    route = decide(facts(site))
    if isinstance(route, NoRoute):
        raise SetupError(route.blocker)
    if route.unprivileged and target is not None and not target.site_image:
        raise SetupError(
            f"{target.name}: this host builds only under proot (no user namespaces, no fakeroot), which "
            "builds from an image: a target on a site's own image (site_image in its recipe, as lumi-laif) "
            f"builds here; {target.name} starts from a Debian root, which needs root or --fakeroot; build "
            "it on another host and copy the image"
        )
    return route
