"""The higher-level frameworks users start from: Lightning, Hugging Face transformers,
accelerate and datasets, at the versions.yaml pins, in the top layer (so adding or bumping
them rebuilds neither the OS nor torch). Each sets itself up for distributed training from
the launcher's variables (torchrun's, Slurm's or launchenv's): the image needs nothing else.

Pins never move: first every package the venv holds (torch, DeepSpeed, mpi4py, numpy, pip...)
goes as `name==version` into a constraints file kept in the image (CONSTRAINTS, beside
image.json), and pip installs the frameworks under it (`-c`). If one needs another version of
such a package, the layer fails with one line that starts with contract.FAILURE_MARKER and names
the pins pip refused to move (from pip's `--log`), which the builder reports (layerbuild/layers.py).
A target with a Python lock installs them from it; a site-image target, only those it lacks.

Emits: "frameworks", build (the constraints file, then one pip install under it) and final
(a %test that each imports at its pin, `pip check`, and that every pin of the constraints file
still holds; a %help line); nothing when the target goes without.
Reads: target.python.frameworks (true by default for GPU targets, false for cpu; the versions
from versions.yaml `frameworks`), .venv, .mistagged (wheels whose tag pip misreads: `pip check`'s
"not supported on this platform" line for each is let through, nothing else). No site fields.

Example, recipes/targets/lumi-rocm.yaml (a GPU target: frameworks on) renders
(containers/lumi-rocm.def, shortened; C stands for /opt/venv/share/hpc-ml-runtime/constraints.txt):

    echo '--- build: frameworks'
    mkdir -p /opt/venv/share/hpc-ml-runtime
    pip list --format=freeze | grep -E '^[A-Za-z0-9._-]+==[^[:space:]]+$' > C
    pip_log="$(mktemp /tmp/hpcml-frameworks-XXXXXX)"
    if ! pip install --no-cache-dir --log "$pip_log" -c C lightning==2.6.6 transformers==5.25.0 ...; then
        ...
        if [ -n "$pinned" ]; then echo "hpcml-error: the frameworks need other versions of ..." >&2; fi
    ...
    echo '--- test: frameworks'
    python -m smoke.imports lightning==2.6.6 transformers==5.25.0 accelerate==1.16.0 datasets==5.2.0
    pip check
    python -m smoke.pins C

recipes/targets/gh200-cuda.yaml names one mis-tagged wheel; in place of the bare `pip check`
its %test has (M: '(nvidia-cusparselt-cu13) [^ ]+ is not supported on this platform'):

    if ! pip_check="$(pip check 2>&1)"; then
        left="$(printf '%s\\n' "$pip_check" | grep -vxE M || true)"
        if [ -n "$left" ]; then printf '%s\\n' "$left" >&2; exit 1; fi
        echo 'pip check: only the wheels whose tag pip misreads: nvidia-cusparselt-cu13'
    fi
"""

from ... import contract
from ...recipes.target_model import Target
from ...values.shell import cmd
from ..parts import Part
from ..pip_install import Request, locked, locked_lines

# what the venv held before the frameworks, as pip constraints; under the venv, beside image.json
CONSTRAINTS = contract.IMAGE_FACTS.rsplit("/", 1)[0] + "/constraints.txt"
# exact pins only: not `name @ file://...` nor `-e ...`
_PIN_LINE = "^[A-Za-z0-9._-]+==[^[:space:]]+$"
# how pip names a pin a conflict hit, "The user requested (constraint) numpy==2.4.6" (pip 23.0
# in the images; the tests run 23.2, and 26 says it so too)
_REFUSED = "s/^.*The user requested (constraint) //p"


def constraints_path(target: Target) -> str:
    return f"{target.python.venv}/{CONSTRAINTS}"


def parts(target: Target):
    if not target.python.frameworks:
        return []
    pins = [f"{name}=={version}" for name, version in target.python.frameworks]
    constraints = constraints_path(target)
    # a site's image may hold some already: those stay as it has them, checked as they are
    tested = [pin.split("==")[0] for pin in pins] if target.site_image else pins
    request = Request("frameworks", tuple(pins))
    if not target.site_image and locked(target, request):
        # nothing to resolve: the lock holds the frameworks and what they pulled in, at
        # versions that move no pin below; the constraints file still records those pins
        install = [*_freeze(constraints), *locked_lines(target, request)]
    else:
        install = _install_lines(pins, constraints, only_missing=bool(target.site_image))
    return [
        Part(block="frameworks", stage="build", post=tuple(install)),
        Part(
            block="frameworks",
            stage="final",
            # each imports and is the pinned release; what the layers below hold (torch,
            # DeepSpeed, numpy...) is as they left it, and every requirement is met
            test=(
                cmd("python", "-m", "smoke.imports", *tested),
                *_pip_check(target.python.mistagged),
                cmd("python", "-m", "smoke.pins", constraints),
            ),
            help=(
                "Frameworks: "
                + ", ".join(f"{name} {version}" for name, version in target.python.frameworks)
                + " (examples/ in the project shows each under torchrun and srun).",
            ),
        ),
    ]


def _pip_check(mistagged) -> list:
    """`pip check`, letting through only its "not supported on this platform" line for each
    wheel the recipe names as mis-tagged (python.mistagged); any other complaint fails."""
    if not mistagged:
        return [cmd("pip", "check")]
    names = [name for name, _why in mistagged]
    allowed = "(" + "|".join(name.replace(".", "[.]") for name in names) + ") [^ ]+ is not supported on this platform"
    return [
        'if ! pip_check="$(pip check 2>&1)"; then',
        f'    left="$(printf \'%s\\n\' "$pip_check" | grep -vxE {cmd(allowed)} || true)"',
        '    if [ -n "$left" ]; then printf \'%s\\n\' "$left" >&2; exit 1; fi',
        f"    echo {cmd('pip check: only the wheels whose tag pip misreads: ' + ', '.join(names))}",
        "fi",
    ]


def _install_lines(pins, constraints, only_missing=False) -> list:
    """The constraints file of what the venv holds, then pip under it; one marked line and
    exit 1 when pip would have to move a pin. only_missing: those the venv lacks (a site's image)."""
    refused = (
        f"{contract.FAILURE_MARKER}the frameworks need other versions of packages the layers below "
        "pinned (${pinned% }); pip refused to move them; its reasons precede this line in the log"
    )
    pip = cmd("pip", "install", "--no-cache-dir", "--log") + ' "$pip_log" ' + cmd("-c", constraints)
    install, choose = f"{pip} {cmd(*pins)}", []
    if only_missing:  # "$@": the pins whose package the venv lacks, maybe none
        install = f'{{ [ "$#" -eq 0 ] || {pip} "$@"; }}'
        choose = [
            "set --",
            f'for pin in {cmd(*pins)}; do pip show "${{pin%%==*}}" >/dev/null 2>&1 || set -- "$@" "$pin"; done',
            'echo "frameworks the image lacks: ${*:-none}"',
        ]
    return [
        *choose,
        *_freeze(constraints),
        'pip_log="$(mktemp /tmp/hpcml-frameworks-XXXXXX)"',
        f"if ! {install}; then",
        f"    pinned=\"$(sed -n {cmd(_REFUSED)} \"$pip_log\" | sort -u | tr '\\n' ' ')\"",
        f'    if [ -n "$pinned" ]; then echo "{refused}" >&2; fi',
        '    rm -f "$pip_log"',
        "    exit 1",
        "fi",
        'rm -f "$pip_log"',
    ]


def _freeze(constraints) -> list:
    """What the venv holds now, as exact pins in the constraints file."""
    return [
        cmd("mkdir", "-p", constraints.rsplit("/", 1)[0]),
        "pip list --format=freeze | " + cmd("grep", "-E", _PIN_LINE) + " > " + cmd(constraints),
    ]
