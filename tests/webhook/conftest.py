"""Pytest fixtures of the webhook tests (defined in webhook_support and tests.support.fixtures)."""

from tests.support.fixtures import fake_api
from tests.webhook.webhook_support import running

__all__ = ["fake_api", "running"]
