"""The one Jinja2 environment for the builder's templates (definition files, module files,
entry-point scripts), with a quoting filter for each language written."""

import jinja2

from ..values.check import comment
from ..values.lua_tcl import lua_long_string, lua_string, tcl_word
from ..values.shell import quote

templates = jinja2.Environment(
    loader=jinja2.PackageLoader("builder.render", "templates"),
    undefined=jinja2.StrictUndefined,
    keep_trailing_newline=True,
    trim_blocks=True,
    lstrip_blocks=True,
    autoescape=False,
)
templates.filters.update(sh=quote, lua=lua_string, lua_long=lua_long_string, tcl=tcl_word, comment=comment)
