"""Real interpreters that read module files back, for tests/builder/test_written_modules.py:
Lua (lupa) as Lmod runs a .lua module (`load` of the file's text, in a table holding only
Lmod's functions), and Tcl (Python's own tkinter, no display) as Environment Modules and
Lmod's tcl2lua read a Tcl one (`source`, which reads a carriage return as a newline and stops
at ^Z), in a child interpreter where every command but `proc` is hidden. Each module function
is a stub that records its arguments; a call of anything else fails."""

import tkinter
from pathlib import Path

import lupa.lua54 as lua54

# Lmod's functions a module file may call; each records its call
LMOD_FUNCTIONS = (
    "help", "whatis", "family", "conflict", "prereq", "depends_on", "load", "always_load", "try_load",
    "setenv", "pushenv", "unsetenv", "prepend_path", "append_path", "remove_path", "execute",
    "LmodMessage", "LmodError", "LmodWarning", "myModuleName", "myModuleVersion", "myModuleFullName",
    "os", "io", "require", "print",
)  # fmt: skip

# Environment Modules' commands, and `puts` (ModulesHelp's) and `set` (.version's)
TCL_COMMANDS = (
    "setenv", "unsetenv", "prepend-path", "append-path", "remove-path", "module-whatis", "conflict", "prereq",
    "module", "family", "puts", "set", "exec", "system", "source", "is-loaded", "module-info",
)  # fmt: skip

_LUA_RUN = """
function(text, names, record)
  local env = {}
  for _, name in ipairs(names) do
    env[name] = function(...) record(name, ...) end
  end
  local chunk, message = load(text, "=modulefile", "t", env)
  if not chunk then error(message) end
  chunk()
end
"""


class LuaReader:
    """One Lua interpreter for a test module: ``calls(text)`` runs a module file's text and
    gives ((function, arg, ...), ...) in the order called."""

    def __init__(self):
        self.lua = lua54.LuaRuntime(encoding=None)  # bytes both ways: bad UTF-8 shows up on decoding
        self.run = self.lua.eval(_LUA_RUN)
        self.names = self.lua.table(*(name.encode() for name in LMOD_FUNCTIONS))

    def calls(self, text: str) -> list:
        found = []
        self.run(text.encode(), self.names, lambda *args: found.append(tuple(_text(arg) for arg in args)))
        return found


def _text(value):
    return value.decode() if isinstance(value, bytes) else value


class TclReader:
    """One Tcl interpreter for a test module: ``calls(path)`` sources a file in a fresh child
    interpreter whose only commands are the stubs and `proc`, then runs its ModulesHelp if it
    made one; ((command, arg, ...), ...) in the order called."""

    def __init__(self):
        self.tcl = tkinter.Tcl()
        self.found = []
        self.tcl.createcommand("record", lambda *args: self.found.append(args))

    def calls(self, path: Path) -> list:
        self.found = []
        tcl = self.tcl
        tcl.eval("interp create module")
        try:
            for command in tcl.splitlist(tcl.eval("interp eval module {info commands}")):
                if command != "proc":
                    tcl.call("interp", "hide", "module", command)
            for name in TCL_COMMANDS:
                tcl.call("interp", "alias", "module", name, "", "record", name)
            tcl.call("interp", "invokehidden", "module", "source", "-encoding", "utf-8", str(path))
            if tcl.call("interp", "invokehidden", "module", "info", "procs", "ModulesHelp"):
                tcl.call("interp", "eval", "module", "ModulesHelp")
        finally:
            tcl.eval("interp delete module")
        return list(self.found)
