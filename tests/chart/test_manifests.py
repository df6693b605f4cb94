"""The manifests for a cluster without Helm (deploy/kubernetes/provisioner.yaml) are the chart's, and
what README "Production" says to replace is there to replace."""

from __future__ import annotations

import pytest
import yaml

pytest.importorskip("helm_python")

from tests.chart import manifests


def test_the_committed_manifests_are_the_chart_rendered() -> None:
    assert manifests.OUT.read_text() == manifests.render(), (
        "regenerate with: .venv/bin/python -m tests.chart.manifests"
    )


def test_the_manifests_hold_no_secret_and_every_placeholder() -> None:
    text = manifests.OUT.read_text()
    kinds = [d["kind"] for d in yaml.safe_load_all(text) if d]
    assert "Secret" not in kinds
    assert kinds[0] == "ServiceAccount" and "MutatingWebhookConfiguration" in kinds
    for placeholder in ("CLUSTER_NAME", "AWS_REGION", "QUEUE_URL", "REGISTRY/provisioner", "CA_BUNDLE"):
        assert placeholder in text
    assert "managed-by" not in text
