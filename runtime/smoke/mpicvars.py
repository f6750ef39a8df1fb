"""MPI control variables as the MPI library itself reads them, through the MPI tool
interface (MPI_T, MPI 3.0): what the image's environment asked for is only in force when the
library took it (a misspelt MPIR_CVAR_ name, or an MPICH without the variable, is silently
ignored by MPICH). MPI_T needs no launcher and no MPI_Init, so this runs in %test.

    python -m smoke.mpicvars MPIR_CVAR_ENABLE_GPU=1 ...          # the libmpi mpi4py loads
    python -m smoke.mpicvars --library /opt/mpich/lib/libmpi.so.12 NAME=VALUE ...

Prints one `NAME=VALUE` line per variable as read; exits 1 with one line naming each variable
that is missing or holds another value. Integer and boolean variables only (MPICH's GPU
switches are); a variable of another type is reported as such, not misread.
"""

import argparse
import ctypes
import sys

MPI_SUCCESS = 0
MPI_THREAD_SINGLE = 0  # 0 in MPICH's mpi.h and Open MPI's alike
MPI_T_ERR_INVALID_NAME = 73  # MPICH's (MPI 3.1: the name is not a control variable)


class ToolInterfaceError(Exception):
    """An MPI_T call that failed, with the call's name and its return code."""


def _call(library, name, *args):
    code = getattr(library, name)(*args)
    if code != MPI_SUCCESS:
        raise ToolInterfaceError(f"{name} returned {code}")
    return code


def read(library, names) -> dict:
    """{name: int value, or None when the library has no such control variable}."""
    provided = ctypes.c_int()
    _call(library, "MPI_T_init_thread", MPI_THREAD_SINGLE, ctypes.byref(provided))
    try:
        return {name: _read_one(library, name) for name in names}
    finally:
        library.MPI_T_finalize()


def _read_one(library, name):
    index = ctypes.c_int()
    code = library.MPI_T_cvar_get_index(name.encode(), ctypes.byref(index))
    if code != MPI_SUCCESS:
        return None  # MPI_T_ERR_INVALID_NAME; any other failure reads as absent too
    handle, count = ctypes.c_void_p(), ctypes.c_int()
    # no object to bind to: these are per-process variables (MPI_T_BIND_NO_OBJECT)
    _call(library, "MPI_T_cvar_handle_alloc", index, None, ctypes.byref(handle), ctypes.byref(count))
    try:
        if count.value != 1:
            raise ToolInterfaceError(f"{name} holds {count.value} values, not one integer")
        value = (ctypes.c_int64 * 4)()  # room for any scalar; an int fills the first 4 bytes
        _call(library, "MPI_T_cvar_read", handle, value)
        return ctypes.cast(value, ctypes.POINTER(ctypes.c_int)).contents.value
    finally:
        library.MPI_T_cvar_handle_free(ctypes.byref(handle))


def library_of(mpi_module):
    """The libmpi an mpi4py MPI module was linked against (looked up through its handle)."""
    return ctypes.CDLL(mpi_module.__file__, mode=ctypes.RTLD_GLOBAL)


def mpi4py_library():
    """The libmpi mpi4py loads, without starting MPI."""
    import mpi4py

    mpi4py.rc.initialize = False
    mpi4py.rc.finalize = False
    from mpi4py import MPI

    return library_of(MPI)


def asked_by(environ) -> dict:
    """The control variables an environment sets to an integer (MPIR_CVAR_*, MPICH's)."""
    return {
        name: int(value)
        for name, value in sorted(environ.items())
        if name.startswith("MPIR_CVAR_") and _is_integer(value.strip())
    }


def shown(found: dict) -> list:
    """NAME=VALUE for each variable read, NAME=absent for one the library lacks."""
    return [f"{name}={'absent' if value is None else value}" for name, value in found.items()]


def differences(expected: dict, found: dict) -> list:
    wrong = []
    for name, value in expected.items():
        if found[name] is None:
            wrong.append(f"{name} is not a control variable of this MPI")
        elif found[name] != value:
            wrong.append(f"{name} is {found[name]}, expected {value}")
    return wrong


def _is_integer(text) -> bool:
    return text.lstrip("-").isdigit()


def _pair(text):
    name, sep, value = text.partition("=")
    if not sep or not name or not _is_integer(value):
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME=INTEGER, such as MPIR_CVAR_ENABLE_GPU=1")
    return name, int(value)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m smoke.mpicvars", description=__doc__.splitlines()[0])
    parser.add_argument("--library", help="the libmpi to ask (default: the one mpi4py loads)")
    parser.add_argument("expected", nargs="+", type=_pair, metavar="NAME=VALUE")
    args = parser.parse_args(argv)
    expected = dict(args.expected)
    library = ctypes.CDLL(args.library) if args.library else mpi4py_library()
    try:
        found = read(library, expected)
    except ToolInterfaceError as error:
        print(f"mpicvars: the MPI tool interface failed: {error}", file=sys.stderr)
        return 1
    print("\n".join(shown(found)))
    wrong = differences(expected, found)
    if wrong:
        print("mpicvars: " + "; ".join(wrong), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
