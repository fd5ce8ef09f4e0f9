"""Pytest fixtures of the kubekit tests (defined in tests.support.fixtures)."""

from tests.support.fixtures import fake_api, kube

__all__ = ["fake_api", "kube"]
