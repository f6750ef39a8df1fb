"""Load a recipe tree (sites, targets, versions, DeepSpeed ops), check it, resolve targets."""

import dataclasses
import re
from pathlib import Path

from .. import contract, lockfile
from ..errors import RecipeError, did_you_mean
from . import schema_passes, validate, yamlsrc
from .merge import Origin, merge
from .section import Section
from .site_model import Site
from .target_model import Target
from .target_parts import Versions

NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")


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
        self.plans = {}  # render.layer_sharing's, per target: derived, never loaded
        base = Path(root)
        if not base.is_dir():
            raise RecipeError(
                "recipes directory not found; expected a directory holding sites/, targets/ and versions.yaml, "
                f"named by --recipes DIR or {contract.RECIPES}",
                file=self.root,
            )
        try:
            self._load_all()
        finally:
            schema_passes.save()  # the passes found so far, also when a file was refused

    def _load_all(self):
        self.versions = self._load("versions.yaml", "versions")
        self.ds_ops = self._load("deepspeed-ops.yaml", "deepspeed-ops")
        self.sites, self.broken_sites = {}, {}
        self.site_docs = {}  # the files as written, for `show` only: code reads the Sites
        for name, loaded in self._folder("sites", "site", keep_errors=True).items():
            try:
                if isinstance(loaded, RecipeError):
                    raise loaded
                self.sites[name] = Site.from_yaml(name, Section(loaded, loaded.data))
                self.site_docs[name] = loaded
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
            raise RecipeError(f"missing file; expected {relative} in the recipes directory", file=self._shown(relative))
        doc = yamlsrc.load(path, self._shown(relative))
        validate.check(doc, doc.data, schema_name, partial)
        return doc

    def _folder(self, folder, schema_name, partial=False, keep_errors=False):
        """name: document for each recipe file; with keep_errors, a file that does not load
        or validate maps to its RecipeError instead of stopping the rest."""
        directory = Path(self.root, folder)
        if not directory.is_dir():
            raise RecipeError(
                f"missing directory; expected {folder}/ in the recipes directory", file=self._shown(folder)
            )
        docs = {}
        for path in sorted(directory.iterdir()):
            if path.name.startswith(".") or path.suffix not in (".yaml", ".yml", ".json"):
                continue
            if path.suffix != ".yaml":
                raise RecipeError("unexpected file; recipes end in .yaml", file=self._shown(folder, path.name))
            if not NAME.match(path.stem):
                raise RecipeError(
                    "bad file name; expected lower-case letters, digits and dashes, such as puhti-cuda.yaml",
                    file=self._shown(folder, path.name),
                )
            try:
                docs[path.stem] = self._load(f"{folder}/{path.name}", schema_name, partial)
            except RecipeError as error:
                if not keep_errors:
                    raise
                docs[path.stem] = error
        if not docs:
            raise RecipeError(f"no recipes found; expected {folder}/<name>.yaml files", file=self._shown(folder))
        return docs

    # --- targets -------------------------------------------------------------------------
    def _alias(self, doc):
        """Another name for a target's image (a retired machine's target, kept so that its
        commands still build the image that now serves its GPUs)."""
        extra = sorted(set(doc.data) - {"alias_of", "description"})
        if extra:
            raise doc.error((extra[0],), f"an alias takes only alias_of and description; found {extra[0]!r}")
        real = doc.data["alias_of"]
        if real not in self.target_docs:
            raise doc.error(
                ("alias_of",),
                f"unknown target {real!r}; expected one of the targets "
                f"that are not aliases: {', '.join(sorted(self.target_docs))}",
            )
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
            raise doc.error(("extends",), f"{base!r} is an alias of {self.aliases[base]!r}; expected the target itself")
        if base not in self.target_docs:
            raise doc.error(
                ("extends",), f"unknown target {base!r} (expected one of: {', '.join(sorted(self.target_docs))})"
            )
        base_data, origin = self._merged(base, chain + (name,))
        return merge(base_data, origin, own, doc), origin

    def _target(self, name):
        data, origin = self._merged(name)
        doc = self.target_docs[name]
        validate.check(yamlsrc.Document(doc.file, data, doc.lines), data, "target", origin=origin)
        spec = Section(origin, data)
        target = Target.from_yaml(name, spec, self._linked_sites(spec), Versions(self.versions), self.ds_ops)
        lock = lockfile.checked(lockfile.load(self.root, name), target, self.versions.data)
        debian = tuple(d for d in (lockfile.load_debian(self.root, name, s) for s in ("build", "final")) if d)
        return dataclasses.replace(target, python_lock=lock, debian_locks=debian)

    def _linked_sites(self, spec):
        """The Sites a target names; SiteBroken when one of their files is broken."""
        sites = []
        for index, site_name in enumerate(spec["sites"]):
            if site_name in self.broken_sites:
                raise SiteBroken(self.broken_sites[site_name])
            if site_name not in self.sites:
                raise spec.error(
                    ("sites", index),
                    f"unknown site {site_name!r} (expected one of: "
                    f"{', '.join(sorted(self.sites))}){did_you_mean(site_name, self.sites)}",
                )
            sites.append(self.sites[site_name])
        return tuple(sites)

    def target(self, name):
        name = self.aliases.get(name, name)
        if name in self.unusable:
            error = self.unusable[name]
            raise RecipeError(
                f"{error.message} (target {name} runs on this site)", file=error.file, line=error.line, path=error.path
            )
        if name not in self.targets:
            known = {*self.targets, *self.aliases}
            raise RecipeError(
                f"unknown target {name!r} (expected one of: {', '.join(sorted(known))})" + did_you_mean(name, known),
                file="command line",
            )
        return self.targets[name]

    def site(self, name):
        """A site by the name given on the command line."""
        if name in self.broken_sites:
            raise self.broken_sites[name]
        if name not in self.sites:
            raise RecipeError(
                f"unknown site {name!r}; expected one of: {', '.join(sorted(self.sites))}"
                + did_you_mean(name, self.sites),
                file="command line",
            )
        return self.sites[name]

    def require_all_valid(self):
        """The first broken site file's error, for commands that need every recipe."""
        for name in sorted(self.broken_sites):
            raise self.broken_sites[name]

    def parent(self, name):
        """The target `name` extends, or None."""
        return self.target_docs[self.target(name).name].data.get("extends")
