"""The opt-in NetworkPolicy: only the API server's addresses (and extraFrom) reach the webhook port."""

from __future__ import annotations

from tests.chart.chart_rendering import NAMESPACE, Obj, merged, of_component, of_kind, one, render


def test_off_by_default(mode_values: dict[str, Obj]) -> None:
    assert of_kind(render(mode_values["generate"]), "NetworkPolicy") == []


def test_admits_only_the_api_server_and_extra_peers_on_the_webhook_port(mode_values: dict[str, Obj]) -> None:
    prometheus = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    values = {
        "webhook": {
            "port": 10250,
            "networkPolicy": {"enabled": True, "apiServerCIDRs": ["10.0.0.0/28"], "extraFrom": [prometheus]},
        }
    }
    objects = render(merged(mode_values["generate"], values))
    policy = one(objects, "NetworkPolicy")
    webhook_pods = of_component(objects, "Deployment", "webhook")["spec"]["selector"]["matchLabels"]
    assert policy["metadata"]["namespace"] == NAMESPACE
    assert policy["spec"]["podSelector"] == {"matchLabels": webhook_pods}
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    assert policy["spec"]["ingress"] == [
        {
            "ports": [{"protocol": "TCP", "port": 10250}],
            "from": [{"ipBlock": {"cidr": "10.0.0.0/28"}}, prometheus],
        }
    ]
