"""Pytest fixtures of the kubectl plugin tests (defined in tests.support.fixtures)."""

from tests.support.fixtures import fake_api

__all__ = ["fake_api"]
