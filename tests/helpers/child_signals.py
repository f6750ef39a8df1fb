"""Children that a test stops with a signal start with that signal at its default disposition.

A POSIX shell without job control starts an ``&`` job with SIGINT and SIGQUIT ignored
(`bash -c 'make test & wait $!'`, a CI script, nohup for SIGHUP). Ignored signals stay ignored
across fork and exec, and neither subprocess (its restore_signals covers SIGPIPE, SIGXFZ and
SIGXFSZ only) nor Python resets them: a Python child then installs no SIGINT handler, so no
KeyboardInterrupt, and a shell cannot trap a signal ignored at its start. A test that sends
such a signal to a child passes ``preexec_fn=default_signals`` (issue #65). What the child
starts inherits the default dispositions, across exec, unless it ignores them again itself.
"""

import signal

# the signals that ask a process to stop, and SIGPIPE (Python ignores it in its own process)
STOPPING = (signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE)


def default_signals():
    """For ``subprocess.Popen(..., preexec_fn=default_signals)``: in the child, between fork
    and exec, every signal of STOPPING at SIG_DFL and none of them blocked. It combines with
    start_new_session (subprocess calls setsid first)."""
    for sig in STOPPING:
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOPPING)
