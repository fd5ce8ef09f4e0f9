"""Pytest fixtures of the webhook tests (defined in webhook_support)."""

from tests.webhook.webhook_support import fake_api, running

__all__ = ["fake_api", "running"]
