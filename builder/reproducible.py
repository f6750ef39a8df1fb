"""What makes two builds from the same commit and lock hold the same files, and the files that
still differ, each with its reason.

Every %post starts with a fixed build time, hash seed, time zone, locale and umask, and ends
by removing what a build leaves behind that is about the build, not the image (logs, caches):

  - SOURCE_DATE_EPOCH: Python then writes hash-based .pyc files (no source time in them),
    wheels built in the image get fixed zip times, useradd a fixed password-change day;
    mksquashfs and debootstrap, run by Apptainer, see it too (layerbuild). A fixed time, not
    the commit's: the definition is committed, so the commit's time cannot be in it.
  - PYTHONHASHSEED=0: setup.py files that build lists from sets (DeepSpeed's) write them in
    one order.
  - the tidy step: dpkg's and apt's logs, ldconfig's aux-cache (it records the time each
    folder was read), backup copies of dpkg's and debconf's databases, pip's cache.
  - the last stage of a shipped Debian root also forgets the build host: debootstrap copies
    the host's name into /etc/hostname and writes the build's mirror (the host's, or a
    bundle's server on loopback) into apt's sources. They become a fixed name and sources
    that name no mirror: the line stays, commented out, with MIRROR-URL where the mirror was,
    for whoever installs on top to fill in.
  - a layer below it on a Debian root forgets the mirror too, but keeps apt's lines active:
    `deb MIRROR-URL bookworm main`, which the next layer's build points at its own mirrors
    before it installs anything (layerbuild/host_settings.apt_lines). So the devel and base
    layers are the same files whichever mirror built them (a bundle's loopback server too).

Example: stage_post("final", ["apt-get update", ...]) -> ["umask 022", "export SOURCE_DATE_EPOCH=...
PYTHONHASHSEED=0 TZ=UTC LC_ALL=C.UTF-8", "apt-get update", ..., "echo '--- final: tidy'", "rm -rf ..."]
"""

import datetime

SOURCE_DATE_EPOCH = 1767225600  # 2026-01-01T00:00:00Z
# the time zone and locale too: a build host's TZ and LANG must not reach what %post writes
ENV = (("SOURCE_DATE_EPOCH", str(SOURCE_DATE_EPOCH)), ("PYTHONHASHSEED", "0"), ("TZ", "UTC"), ("LC_ALL", "C.UTF-8"))
UMASK = "022"  # files pip and compilers write get the same modes whatever the host's umask

LEFT_BEHIND = (
    "/var/log/apt/*.log",
    "/var/log/apt/eipp.log.xz",
    "/var/log/dpkg.log",
    "/var/log/alternatives.log",
    "/var/log/bootstrap.log",
    "/var/cache/ldconfig/aux-cache",
    "/var/cache/debconf/*-old",
    "/var/lib/dpkg/*-old",
    "/root/.cache",
)

# What a shipped Debian root holds in place of the build host's name and mirror
NEUTRAL_HOSTNAME = "localhost"
MIRROR_PLACEHOLDER = "MIRROR-URL"  # no mirror's name: each site has its own
SECURITY_PLACEHOLDER = "SECURITY-MIRROR-URL"  # the security archive is elsewhere on most mirrors
FORGET_HOST = (
    f"printf '%s\\n' {NEUTRAL_HOSTNAME} > /etc/hostname",
    "if [ -f /etc/apt/sources.list ]; then sed -i -E "
    f"'s#^deb [^ ]+ ([a-z]+-security) #\\# deb {SECURITY_PLACEHOLDER} \\1 #; "
    f"s#^deb [^ ]+ #\\# deb {MIRROR_PLACEHOLDER} #' /etc/apt/sources.list; fi",
    "if [ -f /etc/apt/sources.list.d/debian.sources ]; then sed -i -E "
    f"'s#^URIs: .*#URIs: {MIRROR_PLACEHOLDER}#; s#^Types: #Enabled: no\\nTypes: #' "
    "/etc/apt/sources.list.d/debian.sources; fi",
)


# What a Debian root's layer below the image holds in place of the build's mirrors
NEUTRAL_SOURCES = (
    "if [ -f /etc/apt/sources.list ]; then sed -i -E "
    f"'s#^deb [^ ]+ ([a-z]+-security) #deb {SECURITY_PLACEHOLDER} \\1 #;t;s#^deb [^ ]+ #deb {MIRROR_PLACEHOLDER} #' "
    "/etc/apt/sources.list; fi",
)


def stage_post(stage: str, post: list, debian_layer=None) -> list:
    """A stage's %post lines between the fixed build time and the tidy step. ``debian_layer``:
    the layer ("devel", "base", "image") of a stage on a Debian root, None for another root:
    the image layer's last stage then also forgets the build host (FORGET_HOST), a lower
    layer's stage its mirrors (NEUTRAL_SOURCES)."""
    if not post:
        return post
    start = [f"umask {UMASK}", "export " + " ".join(f"{name}={value}" for name, value in ENV)]
    tidy = [
        f"echo '--- {stage}: tidy'",
        *(FORGET_HOST if debian_layer == "image" and stage == "final" else ()),
        *(NEUTRAL_SOURCES if debian_layer in ("devel", "base") else ()),
        "rm -rf " + " ".join(LEFT_BEHIND),
    ]
    return [*start, *post, *tidy]


def build_date() -> str:
    """SOURCE_DATE_EPOCH as Apptainer writes a build's date in its label (Go's
    "Monday_2_January_2006_15:4:5_MST"): "Thursday_1_January_2026_0:0:0_UTC"."""
    when = datetime.datetime.fromtimestamp(SOURCE_DATE_EPOCH, datetime.UTC)
    return f"{when:%A}_{when.day}_{when:%B}_{when.year}_{when.hour}:{when.minute}:{when.second}_UTC"
