from __future__ import annotations

import pytest

from tests.chart.chart_rendering import Obj, cert_mode_values, make_ca_bundle


@pytest.fixture(scope="session")
def ca_bundle() -> str:
    return make_ca_bundle()


@pytest.fixture(scope="session")
def mode_values(ca_bundle: str) -> dict[str, Obj]:
    return cert_mode_values(ca_bundle)
