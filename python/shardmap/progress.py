"""A progress line on stderr for long transfers, on a terminal only.

Nothing is printed for a job whose bytes move in under SHOW_AFTER seconds,
nor when stderr is not a terminal (logs and pipes stay clean).
"""
import sys
import time

SHOW_AFTER = 2.0  # seconds
EVERY = 0.25  # seconds between redraws
MIB = 1 << 20


class Progress:
    """Counts the bytes one job sends and receives. Made only when stderr
    is a terminal; not thread-safe (the sender and the reader of a job run
    on one thread, or the threaded channel's sender only adds to `sent`)."""

    def __init__(self, to_send, stream=None):
        self.stream = stream if stream is not None else sys.stderr
        self.to_send, self.sent = to_send, 0
        self.to_receive, self.received = 0, 0
        self.start = self.last = time.monotonic()
        self.drawn = False

    def add_sent(self, n):
        self.sent += n
        self._maybe_draw()

    def add_received(self, n):
        self.received += n
        self._maybe_draw()

    def _maybe_draw(self):
        now = time.monotonic()
        if now - self.start < SHOW_AFTER or now - self.last < EVERY:
            return
        self.last = now
        rate = (self.sent + self.received) / MIB / (now - self.start)
        line = (f"\rshardmap: sent {self.sent / MIB:.0f}/"
                f"{self.to_send / MIB:.0f} MiB")
        if self.to_receive:
            line += (f", received {self.received / MIB:.0f}/"
                     f"{self.to_receive / MIB:.0f} MiB")
        self.stream.write(f"{line} ({rate:.0f} MiB/s) ")
        self.stream.flush()
        self.drawn = True

    def done(self):
        if self.drawn:
            self.stream.write("\r\033[K")
            self.stream.flush()
