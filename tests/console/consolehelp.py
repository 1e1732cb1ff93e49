"""Starting and stopping ``chronolog console`` subprocesses: the bench's helpers, so the
tests and the benchmark run the console the same way."""

from bench.harness import start_console, stop_console

__all__ = ["start_console", "stop_console"]
