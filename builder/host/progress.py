"""Progress lines for long work: the step being run and the time since the start."""

import sys
import time


class Progress:
    def __init__(self, stream=sys.stderr):
        self.start = time.monotonic()
        self.stream = stream
        self._said = set()

    def step(self, message):
        print(f"[{time.monotonic() - self.start:7.1f}s] {message}", file=self.stream, flush=True)

    def once(self, message):
        """A step said only the first time in this command (a fact every layer meets again)."""
        if message not in self._said:
            self._said.add(message)
            self.step(message)
