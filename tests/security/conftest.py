"""Fixtures of the security tests (defined in security_support)."""

from tests.security.security_support import flooded_webhook, limited_webhook

__all__ = ["flooded_webhook", "limited_webhook"]
