"""Run a command with user namespaces turned off for it and everything it starts, the host
keeping its own setting: as root, make a user namespace that maps every ID to itself and,
inside it, set user.max_user_namespaces to 0 (the limit is kept per user namespace, and a
child can only lower it). Then `unshare -U` fails with "No space left on device", as an
ordinary user's does on LUMI. Run as a script: python3 no_userns.py COMMAND [ARGS...]."""

import ctypes
import os
import sys

CLONE_NEWUSER = 0x10000000
ALL_IDS = "0 0 4294967295\n"


def main(argv):
    go_read, go_write = os.pipe()
    ready_read, ready_write = os.pipe()
    child = os.fork()
    if child == 0:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.unshare(CLONE_NEWUSER) != 0:
            sys.exit(f"no_userns: unshare: {os.strerror(ctypes.get_errno())}")
        os.write(ready_write, b"x")
        os.read(go_read, 1)  # the parent has written the ID maps
        with open("/proc/sys/user/max_user_namespaces", "w") as limit:
            limit.write("0")
        os.execvp(argv[0], argv)
    os.read(ready_read, 1)
    for name in ("uid_map", "gid_map"):
        with open(f"/proc/{child}/{name}", "w") as ids:
            ids.write(ALL_IDS)
    os.write(go_write, b"x")
    _, status = os.waitpid(child, 0)
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
