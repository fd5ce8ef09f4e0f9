"""Fixtures of the security tests (defined in security_support)."""

from tests.security.security_support import limited_webhook

__all__ = ["limited_webhook"]
