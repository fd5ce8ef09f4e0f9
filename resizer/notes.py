"""Log lines said once per subject: a level-triggered reconciler decides the same thing on every pass (a
dry-run's "would resize", a JobSet waiting for domains) and must not repeat itself on each one."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class NoteOnce(Generic[K]):
    """Subjects already noted, until they are forgotten (their object gone, or the condition over)."""

    def __init__(self, logger: logging.Logger) -> None:
        self._log = logger
        self._lock = threading.Lock()
        self._noted: set[K] = set()

    def note(
        self, subject: K, message: str, *args: object, level: int = logging.INFO, extra: dict[str, Any]
    ) -> bool:
        """Log `message % args` unless `subject` was noted already; True when it is logged now."""
        with self._lock:
            if subject in self._noted:
                return False
            self._noted.add(subject)
        self._log.log(level, message, *args, extra=extra)
        return True

    def forget(self, subject: K) -> None:
        with self._lock:
            self._noted.discard(subject)

    def retain(self, keep: Callable[[K], bool]) -> None:
        """Forget every subject `keep` refuses (say once more if it comes back)."""
        with self._lock:
            self._noted = {subject for subject in self._noted if keep(subject)}

    def __len__(self) -> int:
        with self._lock:
            return len(self._noted)
