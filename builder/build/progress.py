"""Progress lines for long work: the step being run and the time since the start."""

import sys
import time


class Progress:
    def __init__(self, stream=sys.stderr):
        self.start = time.monotonic()
        self.stream = stream

    def step(self, message):
        print(f"[{time.monotonic() - self.start:7.1f}s] {message}", file=self.stream, flush=True)
