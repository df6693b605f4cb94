"""The Helm chart, linted and rendered by the real Helm engine (helm-python-sdk binds Helm's Go SDK):
RBAC has only what the controller uses, the pod runs locked down, the cloud identities are annotated."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, cast

import pytest
import yaml

from provisioner.cloudprovider import registry
from provisioner.cloudprovider.plugin import ProviderPlugin

helm = pytest.importorskip("helm_python")

CHART = Path(__file__).resolve().parents[2] / "charts" / "provisioner"
BASE = {"clusterName": "prod", "aws": {"region": "us-east-1"}}


def render(**values: Any) -> list[dict[str, Any]]:
    chart = helm.Chart.load(str(CHART))
    files = chart.render(values={**BASE, **values}, name="prov", namespace="kube-system")
    docs: list[dict[str, Any]] = []
    for path, text in files.items():
        if path.endswith(".yaml"):
            docs.extend(d for d in yaml.safe_load_all(text) if d)
    return docs


def one(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"{kind} {name}: {[d['metadata']['name'] for d in found]}"
    return found[0]


def rules(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for d in docs if d["kind"] in ("ClusterRole", "Role") for r in d["rules"]]


def test_the_chart_lints_clean() -> None:
    result = helm.lint(str(CHART), BASE)
    assert result["errors"] == []
    assert all(m["severity"] <= 1 for m in result["messages"]), result["messages"]


def test_bad_values_are_refused_by_the_schema() -> None:
    result = helm.lint(str(CHART), {**BASE, "replicas": "two"})
    assert any("replicas" in e for e in result["errors"])
    with pytest.raises(helm.HelmError):
        render(cloud="azure")


def test_rbac_has_no_wildcard_and_no_secret_access() -> None:
    for rule in rules(render()):
        for field in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule.get(field, []), rule
        assert not any(r.startswith("secrets") for r in rule["resources"]), rule


def test_rbac_grants_exactly_the_verbs_the_controller_uses() -> None:
    granted = {
        (g, r, v)
        for rule in rules(render())
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }
    needed = {
        ("", "pods", "watch"),
        ("", "pods", "delete"),
        ("", "pods/eviction", "create"),
        ("", "nodes", "patch"),
        ("", "nodes", "delete"),
        ("", "events", "create"),
        ("provisioner.sh", "nodeclaims", "create"),
        ("provisioner.sh", "nodeclaims/status", "patch"),
        ("provisioner.sh", "nodepools/status", "patch"),
        ("coordination.k8s.io", "leases", "patch"),
        ("", "podtemplates", "watch"),
        ("autoscaling.x-k8s.io", "provisioningrequests", "watch"),
        ("autoscaling.x-k8s.io", "provisioningrequests", "patch"),  # sharded: the quota word
        ("autoscaling.x-k8s.io", "provisioningrequests/status", "patch"),
    }
    assert needed <= granted
    assert ("", "nodes", "create") not in granted, "only the fake cloud registers Nodes"
    assert ("provisioner.sh", "nodepools", "delete") not in granted
    assert all(v in {"get", "list", "watch", "create", "patch", "delete"} for _, _, v in granted)
    fake = {
        (g, r, v)
        for rule in rules(render(cloud="fake"))
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }
    assert ("", "nodes", "create") in fake


def test_leader_election_is_namespaced_to_the_release() -> None:
    role = one(render(), "Role")
    assert role["metadata"]["namespace"] == "kube-system"
    assert role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "patch"]}
    ]


def test_the_deployment_runs_two_replicas_non_root_read_only_with_no_capabilities() -> None:
    docs = render()
    deploy = one(docs, "Deployment")
    assert deploy["spec"]["replicas"] == 2
    pod = deploy["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    (container,) = pod["containers"]
    sc = container["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert container["resources"]["requests"]["cpu"] and container["resources"]["limits"]["memory"]
    assert "--leader-elect" in container["args"] and "--cluster-name=prod" in container["args"]
    pdb = one(docs, "PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"] == deploy["spec"]["selector"]["matchLabels"]
    service = one(docs, "Service", "prov-provisioner-metrics")
    assert service["spec"]["ports"][0]["targetPort"] == "http-metrics"


@pytest.mark.parametrize(
    ("values", "annotation", "expected"),
    [
        (
            {"aws": {"region": "us-east-1", "roleArn": "arn:aws:iam::123456789012:role/provisioner"}},
            "eks.amazonaws.com/role-arn",
            "arn:aws:iam::123456789012:role/provisioner",
        ),
        (
            {"gcp": {"serviceAccount": "prov@proj.iam.gserviceaccount.com"}},
            "iam.gke.io/gcp-service-account",
            "prov@proj.iam.gserviceaccount.com",
        ),
    ],
    ids=["irsa", "gke-workload-identity"],
)
def test_the_service_account_carries_the_cloud_identity(
    values: dict[str, Any], annotation: str, expected: str
) -> None:
    sa = one(render(**values), "ServiceAccount")
    assert sa["metadata"]["annotations"][annotation] == expected


def test_the_service_monitor_is_optional() -> None:
    assert not [d for d in render() if d["kind"] == "ServiceMonitor"]
    monitor = one(render(metrics={"serviceMonitor": {"enabled": True}}), "ServiceMonitor")
    assert monitor["spec"]["endpoints"][0]["port"] == "http-metrics"


def test_the_chart_ships_the_generated_crds() -> None:
    chart = helm.Chart.load(str(CHART))
    names = {c["name"] if isinstance(c, dict) else c.name for c in chart.crds}
    kinds = {
        yaml.safe_load((CHART / "crds" / Path(n).name).read_text())["spec"]["names"]["kind"] for n in names
    }
    assert kinds == {
        "NodePool",
        "NodeClaim",
        "AWSNodeClass",
        "GCPNodeClass",
        "Department",
        "Team",
        "ProvisioningRequest",
    }


def test_every_flag_the_deployment_passes_is_one_provisioner_run_accepts() -> None:
    from typer.main import get_command

    from provisioner.cli.main import app

    run = get_command(app).get_command(None, "run")  # type: ignore[attr-defined]
    known = {opt for p in run.params for opt in (*p.opts, *p.secondary_opts)}
    values = {
        "cloud": "aws,gcp",
        "aws": {"region": "us-east-1", "interruptionQueue": "https://sqs/q", "endpoint": "http://x"},
        "gcp": {"project": "p", "region": "us-central1", "endpoint": "http://y"},
        "defaultNodePools": {"cpu": ["cpu-default-aws"], "gpu": ["t4-best-effort-aws"]},
    }
    (container,) = one(render(**values), "Deployment")["spec"]["template"]["spec"]["containers"]
    assert container["args"][0] == "run"
    flags = [a.split("=", 1)[0] for a in container["args"][1:]]
    assert set(flags) <= known, set(flags) - known


def test_the_default_pools_reach_the_controller_in_order() -> None:
    from provisioner.scheduling.pool_order import ClusterDefaults

    values = {
        "defaultNodePools": {"cpu": ["cpu-default-aws", "cpu-default-gcp"], "gpu": ["a100-standard-aws"]}
    }
    (container,) = one(render(**values), "Deployment")["spec"]["template"]["spec"]["containers"]
    given = dict(a.split("=", 1) for a in container["args"] if a.startswith("--default-"))
    assert ClusterDefaults.of(cpu=given["--default-cpu-pools"], gpu=given["--default-gpu-pools"]) == (
        ClusterDefaults(cpu=("cpu-default-aws", "cpu-default-gcp"), gpu=("a100-standard-aws",))
    )
    (plain,) = one(render(), "Deployment")["spec"]["template"]["spec"]["containers"]
    assert not [a for a in plain["args"] if a.startswith("--default-")]


def test_the_admission_webhook_gates_pods_over_tls_and_never_blocks_the_cluster() -> None:
    import base64

    from cryptography import x509

    docs = render()
    config = one(docs, "MutatingWebhookConfiguration")
    (hook,) = config["webhooks"]
    assert hook["failurePolicy"] == "Ignore"
    assert hook["rules"] == [
        {
            "operations": ["CREATE"],
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "resources": ["pods"],
            "scope": "Namespaced",
        }
    ]
    assert hook["clientConfig"]["service"] == {
        "name": "prov-provisioner-webhook",
        "namespace": "kube-system",
        "path": "/mutate-pods",
        "port": 443,
    }
    assert "kube-system" in hook["namespaceSelector"]["matchExpressions"][0]["values"]
    ca = x509.load_pem_x509_certificate(base64.b64decode(hook["clientConfig"]["caBundle"]))
    secret = one(docs, "Secret", "prov-provisioner-webhook-tls")
    cert = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    assert cert.issuer == ca.subject
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
        x509.DNSName
    )
    assert "prov-provisioner-webhook.kube-system.svc" in names
    container = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert "--webhook-port=9443" in container["args"]
    assert {"name": "https-webhook", "containerPort": 9443, "protocol": "TCP"} in container["ports"]
    assert not [
        d for d in render(admissionWebhook={"enabled": False}) if d["kind"] == "MutatingWebhookConfiguration"
    ]


def test_rbac_lets_admission_read_teams_patch_pods_and_write_team_status() -> None:
    granted = {
        (g, r, v)
        for rule in rules(render())
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }
    assert {
        ("provisioner.sh", "teams", "watch"),
        ("provisioner.sh", "departments", "watch"),
        ("provisioner.sh", "teams/status", "patch"),
        ("provisioner.sh", "departments/status", "patch"),
        ("", "pods", "patch"),
        ("", "pods/status", "patch"),
    } <= granted


def _container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (container,) = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    return cast(dict[str, Any], container)


def test_by_default_the_controller_keeps_no_ledger() -> None:
    docs = render()
    assert "--ledger=none" in _container(docs)["args"]
    assert not [d for d in docs if d["kind"] == "PersistentVolumeClaim"]


def test_the_postgresql_ledger_url_comes_from_a_secret_through_the_environment() -> None:
    docs = render(replicas=3, ledger={"type": "postgresql", "postgresql": {"secretName": "finops-db"}})
    container = _container(docs)
    (env,) = [e for e in container["env"] if e["name"] == "PROVISIONER_LEDGER"]
    assert env["valueFrom"]["secretKeyRef"] == {"name": "finops-db", "key": "url"}
    assert not any(a.startswith("--ledger") for a in container["args"]), "the env var carries it"
    assert one(docs, "Deployment")["spec"]["replicas"] == 3


def test_a_postgresql_ledger_needs_its_secret() -> None:
    with pytest.raises(helm.HelmError, match="secretName"):
        render(ledger={"type": "postgresql"})


def test_the_sqlite_ledger_lives_on_a_volume_claim_for_one_replica() -> None:
    docs = render(replicas=1, ledger={"type": "sqlite", "sqlite": {"size": "5Gi"}})
    deploy = one(docs, "Deployment")
    assert deploy["spec"]["strategy"] == {"type": "Recreate"}
    container = _container(docs)
    assert "--ledger=/var/lib/provisioner/ledger.sqlite" in container["args"]
    assert {"name": "ledger", "mountPath": "/var/lib/provisioner"} in container["volumeMounts"]
    claim = one(docs, "PersistentVolumeClaim")
    assert claim["spec"]["resources"]["requests"]["storage"] == "5Gi"
    (volume,) = [v for v in deploy["spec"]["template"]["spec"]["volumes"] if v["name"] == "ledger"]
    assert volume["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]


def test_the_schema_refuses_a_sqlite_ledger_with_more_than_one_replica() -> None:
    with pytest.raises(helm.HelmError, match="replicas"):
        render(replicas=2, ledger={"type": "sqlite"})
    result = helm.lint(str(CHART), {**BASE, "replicas": 2, "ledger": {"type": "sqlite"}})
    assert any("replicas" in e for e in result["errors"])


@pytest.mark.parametrize(
    ("values", "says"),
    [
        pytest.param({"cloud": "aws", "aws": {"region": ""}}, "aws.region is required", id="aws-region"),
        pytest.param(
            {"cloud": "aws,gcp", "gcp": {"region": "us-central1"}}, "gcp.project is required", id="gcp"
        ),
        pytest.param({"cloud": ""}, "cloud", id="no-cloud"),
    ],
)
def test_the_chart_refuses_a_cloud_without_its_location(values: dict[str, Any], says: str) -> None:
    with pytest.raises(Exception, match=says):
        render(**values)


def test_the_region_reaches_the_controller_only_for_the_clouds_asked_for() -> None:
    args = one(render(cloud="gcp", gcp={"project": "p", "region": "europe-west4"}), "Deployment")["spec"][
        "template"
    ]["spec"]["containers"][0]["args"]
    assert "--gcp-region=europe-west4" in args
    assert not any(a.startswith("--aws-region") for a in args)


def test_shards_reach_the_controller_with_the_right_to_list_leases() -> None:
    docs = render(shards=8, replicas=4)
    deploy = one(docs, "Deployment")
    assert deploy["spec"]["replicas"] == 4
    args = _container(docs)["args"]
    assert "--shards=8" in args and "--lease-name=prov-provisioner-leader" in args
    assert one(docs, "Role")["rules"] == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "verbs": ["get", "create", "patch", "list"],
        }
    ]
    assert not any(a.startswith("--shards") for a in _container(render())["args"]), "off by default"


def test_the_chart_refuses_shards_below_zero_or_with_the_fake_cloud() -> None:
    assert any("shards" in e for e in helm.lint(str(CHART), {**BASE, "shards": -1})["errors"])
    with pytest.raises(helm.HelmError, match="cloud fake"):
        render(shards=4, cloud="fake")


# --- every provider plug-in's chart pieces (provisioner.cloudprovider.plugin.ChartPieces) -------------------

PLUGINS = registry.plugins()


def _cloud_values(plugin: ProviderPlugin) -> dict[str, Any]:
    """Every value of the plug-in set (to its example), so each flag and annotation it feeds shows."""
    return {plugin.name: dict(plugin.chart.examples)} if plugin.chart.examples else {}


@pytest.mark.parametrize("plugin", PLUGINS, ids=[p.name for p in PLUGINS])
def test_the_values_file_holds_each_plugin_s_values_under_its_name(plugin: ProviderPlugin) -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())

    assert values.get(plugin.name, {}) == dict(plugin.chart.values)
    assert set(plugin.chart.examples) == set(plugin.chart.values)
    schema = json.loads((CHART / "values.schema.json").read_text())
    assert re.fullmatch(schema["properties"]["cloud"]["pattern"], plugin.name)


@pytest.mark.parametrize("plugin", PLUGINS, ids=[p.name for p in PLUGINS])
def test_the_deployment_passes_each_plugin_s_flags_and_the_service_account_its_identity(
    plugin: ProviderPlugin,
) -> None:
    docs = render(cloud=plugin.name, **_cloud_values(plugin))
    args = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    annotations = one(docs, "ServiceAccount")["metadata"].get("annotations") or {}

    assert f"--cloud={plugin.name}" in args
    examples = plugin.chart.examples
    assert {f"{flag}={examples[key]}" for flag, key in plugin.chart.flags.items()} <= set(args)
    assert {a: annotations.get(a) for a in plugin.chart.annotations} == {
        a: examples[key] for a, key in plugin.chart.annotations.items()
    }
    run_flags = {o.flag for o in plugin.options}
    assert set(plugin.chart.flags) <= run_flags, "the chart passes only flags the plug-in declares"


@pytest.mark.parametrize(
    ("plugin", "key"),
    [(p, key) for p in PLUGINS for key in p.chart.required],
    ids=[f"{p.name}.{key}" for p in PLUGINS for key in p.chart.required],
)
def test_the_chart_refuses_a_plugin_cloud_without_a_required_value(plugin: ProviderPlugin, key: str) -> None:
    values = _cloud_values(plugin)
    values[plugin.name][key] = ""

    with pytest.raises(Exception, match=re.escape(f"{plugin.name}.{key} is required")):
        render(cloud=plugin.name, **values)


@pytest.mark.parametrize("plugin", PLUGINS, ids=[p.name for p in PLUGINS])
def test_rbac_reads_every_plugin_s_nodeclasses_and_grants_its_node_verbs_only_with_it(
    plugin: ProviderPlugin,
) -> None:
    def granted(docs: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
        return {
            (g, r, v)
            for rule in rules(docs)
            for g in rule["apiGroups"]
            for r in rule["resources"]
            for v in rule["verbs"]
        }

    with_it = granted(render(cloud=plugin.name, **_cloud_values(plugin)))
    others = [p for p in PLUGINS if p is not plugin and not p.chart.node_verbs]
    without = granted(render(cloud=others[0].name, **_cloud_values(others[0])))

    for kind in plugin.nodeclasses:
        assert {("provisioner.sh", kind.plural, v) for v in ("get", "list", "watch")} <= without
    for verb in plugin.chart.node_verbs:
        assert ("", "nodes", verb) in with_it
        assert ("", "nodes", verb) not in without


@pytest.mark.parametrize("plugin", PLUGINS, ids=[p.name for p in PLUGINS])
def test_shards_are_refused_exactly_with_the_clouds_that_say_why(plugin: ProviderPlugin) -> None:
    values = {"cloud": plugin.name, "shards": 4, "replicas": 2, **_cloud_values(plugin)}

    if plugin.chart.no_shards:
        with pytest.raises(
            helm.HelmError, match=re.escape(f"cloud {plugin.name} ({plugin.chart.no_shards})")
        ):
            render(**values)
    else:
        assert "--shards=4" in _container(render(**values))["args"]
