"""One stack per workdir: a second `make run` must not overwrite the kubeconfig and certificates of one
that is serving (its kubeconfig would then point at a dead port).

`WorkdirClaim(workdir).acquire()` takes an exclusive `flock` on `<workdir>/devstack.lock`, held for as long
as the stack runs and released by the kernel when the process ends, however it ends: a crash leaves no
stale lock. The file says who holds it (`describe`), so the refusal can name the running stack.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

LOCK_FILE = "devstack.lock"


class WorkdirInUse(RuntimeError):
    """Another devstack holds the workdir; the message names it and what to do."""


class WorkdirClaim:
    def __init__(self, workdir: Path) -> None:
        self.path = workdir / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            holder = self.path.read_text().strip() or "another devstack"
            raise WorkdirInUse(
                f"the workdir {self.path.parent} is in use by {holder}: stop that one (Ctrl-C where it "
                "runs), or give this one a workdir of its own (--workdir DIR)"
            ) from None
        self._fd = fd
        self.describe(f"devstack (pid {os.getpid()})")

    def describe(self, holder: str) -> None:
        """What a refused second stack is told about this one."""
        if self._fd is None:
            return
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, holder.encode(), 0)

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None
