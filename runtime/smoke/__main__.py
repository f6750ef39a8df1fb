import os
import sys

from .cli import main

status = main()
# Everything is checked and reported by now. Leave without the interpreter's shutdown: a C++
# thread of torch still running then can abort the process ("terminate called without an
# active exception", seen once under mpirun), turning a passed run into a failed rank.
sys.stdout.flush()
sys.stderr.flush()
os._exit(status)
