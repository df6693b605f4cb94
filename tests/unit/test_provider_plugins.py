"""Clouds are plug-ins: the core loads every provider through the entry-point group `provisioner.providers`
(provisioner.cloudprovider.registry), and a cloud installed from outside this repository works without a
change to the core.

The proof writes a throwaway plug-in package (`toycloud`: a NodeClass kind, a catalog shipped as package
data, a `run` option, a contract harness) into a temporary folder with a `*.dist-info/entry_points.txt`, so
importlib.metadata finds it on PYTHONPATH, then runs the CloudProvider contract suite and `provisioner
simulate` over it in fresh interpreters.
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from provisioner.api import KINDS, plugins
from provisioner.api.kinds import NODECLASS_KINDS
from provisioner.cloudprovider import catalog, registry
from provisioner.cloudprovider.plugin import OptionError, ProviderPlugin, Wiring

ROOT = Path(__file__).resolve().parents[2]

TOY_PLUGIN = '''
"""A throwaway cloud: its own NodeClass kind and catalog; the fake cloud's in-memory machinery launches."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from providers.fake.provider import FakeProvider
from provisioner.api.common import Model
from provisioner.api.karpenter_providers import Converting, KarpenterProvider
from provisioner.api.nodeclass import NodeClass
from provisioner.api.plugins import AGE, CatalogFile, Kind
from provisioner.cloudprovider.plugin import ChartPieces, Option, OptionError, ProviderPlugin, Wiring
from provisioner.cloudprovider.protocol import CloudProvider


class ToyPlacement(Model):
    group_per_gang: bool = False


class ToyNodeClassSpec(Model):
    zones: list[str] = []
    placement: ToyPlacement | None = None


class ToyNodeClass(NodeClass):
    kind: Literal["ToyNodeClass"] = "ToyNodeClass"
    spec: ToyNodeClassSpec

    def launch_zones(self, zones: Sequence[str]) -> list[str]:
        return [z for z in zones if z in self.spec.zones] if self.spec.zones else list(zones)

    @classmethod
    def simulated(cls, name: str, zones: Sequence[str]) -> ToyNodeClass:
        return cls.model_validate({"metadata": {"name": name}, "spec": {"zones": list(zones)}})


def build(options: Mapping[str, str | None], wiring: Wiring) -> CloudProvider:
    if not options.get("toy_region"):
        raise OptionError("--toy-region: required with --cloud toy")
    return FakeProvider(
        catalog="toy", region=options["toy_region"], cluster_name=wiring.cluster_name, clock=wiring.clock
    )


def toy_machine_class(converter: Converting, data: dict) -> dict:
    converter.copy(data, (), ("apiVersion", "kind", "metadata", "spec"), why="not a ToyMachineClass field")
    return converter.copy(data.get("spec"), ("spec",), ("zones",), why="a Karpenter-only field")


PLUGIN = ProviderPlugin(
    name="toy",
    build=build,
    nodeclasses=(
        Kind(model=ToyNodeClass, kind="ToyNodeClass", plural="toynodeclasses", short_names=("toync",), columns=(AGE,)),
    ),
    catalogs={"toy": CatalogFile(package="toycloud", file="catalog.yaml", kinds=("ToyNodeClass",))},
    read_types=lambda query: FakeProvider(catalog="toy", region=query.region).region_instance_types(),
    catalog_defaults={"--region": "toy-1"},
    options=(Option("--toy-region", env="TOY_REGION", help="Region of the toy cloud."),),
    chart=ChartPieces(
        values={"region": "", "identity": ""},
        flags={"--toy-region": "region"},
        required={"region": "where the toy cloud launches"},
        patterns={"identity": "^(toy-[a-z]+)?$"},
        annotations={"toy.example/identity": "identity"},
    ),
    karpenter=KarpenterProvider(
        api_version="karpenter.toy.example/v1",
        nodeclass="ToyMachineClass",
        into="ToyNodeClass",
        convert=toy_machine_class,
        labels={"karpenter.toy.example/family": "provisioner.sh/instance-family"},
    ),
)
'''

TOY_HARNESS = '''
"""The toy cloud's side of the CloudProvider contract suite (testkit/providers/harness.py)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from providers.fake.provider import FakeProvider
from provisioner.api.nodeclass import NodeClass
from provisioner.cloudprovider import TransientError
from toycloud.plugin import ToyNodeClass


def _node_class(**spec: object) -> ToyNodeClass:
    return ToyNodeClass.model_validate({"metadata": {"name": "default"}, "spec": spec})


@dataclass
class ToyHarness:
    provider: FakeProvider
    node_class: NodeClass = field(default_factory=_node_class)
    placement_node_class: NodeClass = field(default_factory=lambda: _node_class(placement={"groupPerGang": True}))
    name: str = "toy"
    zones: list[str] = field(default_factory=lambda: ["toy-1a", "toy-1b"])
    small_types: list[str] = field(default_factory=lambda: ["toy.small", "toy.medium"])
    gpu8_h100_type: str = "toy.h100x8"

    def stockout(self, *, instance_type: str, zone: str, capacity_type: str) -> None:
        self.provider.mark_unavailable(instance_type=instance_type, zone=zone, capacity_type=capacity_type)

    def set_capacity(self, *, instance_type: str, zone: str, capacity_type: str, count: int) -> None:
        self.provider.set_capacity(instance_type=instance_type, zone=zone, capacity_type=capacity_type, count=count)

    def break_atomicity(self) -> None:
        pass

    def throttle(self, *, times: int = 1) -> None:
        self.provider.fail_next_create(TransientError("throttled (toy)"), times=times)

    def launches(self) -> int:
        return self.provider.launched_total


def make_harness() -> Iterator[ToyHarness]:
    yield ToyHarness(provider=FakeProvider(catalog="toy", region="toy-1", cluster_name="contract"))
'''

TOY_CATALOG = {
    "cloud": "toy",
    "overheadFormula": "eks",
    "ephemeralStorageGiB": 20,
    "defaultRegion": "toy-1",
    "regions": {"toy-1": {"zones": ["toy-1a", "toy-1b"], "priceFactor": 1.0}},
    "spotFactor": {"default": 0.5},
    "types": [
        {"name": "toy.small", "vcpu": 2, "memoryMiB": 4096, "maxPods": 29, "arch": "amd64", "onDemand": 0.1},
        {"name": "toy.medium", "vcpu": 4, "memoryMiB": 8192, "maxPods": 58, "arch": "amd64", "onDemand": 0.2},
        {
            "name": "toy.h100x8",
            "vcpu": 192,
            "memoryMiB": 2097152,
            "maxPods": 250,
            "arch": "amd64",
            "onDemand": 60.0,
            "gpu": {"name": "h100", "count": 8, "memoryMiB": 81920, "manufacturer": "nvidia"},
        },
    ],
}

SCENARIO = """\
apiVersion: provisioner.sh/v1alpha1
kind: Scenario
metadata: {name: toy}
spec: {}
---
apiVersion: provisioner.sh/v1
kind: ToyNodeClass
metadata: {name: toy}
spec: {zones: [toy-1b]}
---
apiVersion: provisioner.sh/v1
kind: NodePool
metadata: {name: toys}
spec:
  template:
    spec:
      nodeClassRef: {kind: ToyNodeClass, name: toy}
      requirements:
        - {key: provisioner.sh/capacity-type, operator: In, values: [on-demand]}
---
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default}
spec:
  containers:
    - name: web
      resources: {requests: {cpu: "3", memory: 1Gi}}
"""


@pytest.fixture(scope="module")
def toy_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding the installed `toycloud` package and its dist-info (what pip would write)."""
    site = tmp_path_factory.mktemp("site")
    package = site / "toycloud"
    package.mkdir()
    (package / "__init__.py").write_text('"""A throwaway provider plug-in."""\n')
    (package / "plugin.py").write_text(textwrap.dedent(TOY_PLUGIN))
    (package / "harness.py").write_text(textwrap.dedent(TOY_HARNESS))
    (package / "catalog.yaml").write_text(yaml.safe_dump(TOY_CATALOG, sort_keys=False))
    dist = site / "toycloud-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: toycloud\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[provisioner.providers]\ntoy = toycloud.plugin:PLUGIN\n")
    return site


def _run(site: Path, *args: str, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]), **(extra_env or {})}
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False
    )


def test_the_built_in_clouds_load_through_the_entry_point_group() -> None:
    found = registry.plugins()

    assert [p.name for p in found] == ["aws", "fake", "gcp"]
    assert all(isinstance(p, ProviderPlugin) for p in found)
    assert list(NODECLASS_KINDS) == ["AWSNodeClass", "GCPNodeClass"]
    assert list(KINDS) == ["NodePool", "NodeClaim", "AWSNodeClass", "GCPNodeClass", "Department", "Team"]
    assert catalog.names() == ["aws", "gcp", "karpenter-benchmark"]
    assert registry.names() == ["aws", "gcp", "fake"]  # the development-only cloud last


def _code_strings(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every string in a module's code: its docstrings (which may name examples) left out."""
    tree = ast.parse(path.read_text())
    docs = {
        id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)
    }
    return [
        (n.lineno, n.value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
    ]


def test_no_code_of_the_core_names_a_plugin_s_kind_options_or_karpenter_s_provider_for_it() -> None:
    names = [k.kind for p in registry.plugins() for k in p.nodeclasses]
    names += [
        f for p in registry.plugins() if p.karpenter for f in (p.karpenter.nodeclass, p.karpenter.group)
    ]
    # Its `run` flags and their environment variables, and where `catalog` takes its values from.
    names += [n for p in registry.plugins() for o in p.options for n in (o.flag, o.env) if n]
    names += [d for p in registry.plugins() for d in p.catalog_defaults.values()]
    assert {
        "AWSNodeClass",
        "EC2NodeClass",
        "karpenter.k8s.aws",
        "--fake-state",
        "GOOGLE_CLOUD_PROJECT",
    } <= set(names)

    found = [
        f"{path.relative_to(ROOT)}:{line}: {name}"
        for path in sorted((ROOT / "provisioner").rglob("*.py"))
        for line, text in _code_strings(path)
        for name in names
        if name in text
    ]

    assert found == []


def test_no_function_or_class_of_the_core_is_named_after_a_plugin() -> None:
    words = {p.name for p in registry.plugins()}
    assert {"aws", "gcp", "fake"} <= words

    found = [
        f"{path.relative_to(ROOT)}:{node.lineno}: {node.name}"
        for path in sorted((ROOT / "provisioner").rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        and words & {w.lower() for w in re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+", node.name)}
    ]

    assert found == []


def test_an_unknown_cloud_and_a_missing_option_are_refused_naming_the_flag() -> None:
    wiring = Wiring(cluster_name="c", clock=lambda: None)  # type: ignore[arg-type,return-value]

    with pytest.raises(OptionError, match=r"--cloud: 'azure' is not known; allowed: aws, gcp, fake"):
        registry.build(["azure"], {}, wiring, None)
    with pytest.raises(OptionError, match=r"--aws-region: required with --cloud aws"):
        registry.build(["aws"], {}, wiring, None)


def test_no_installed_plugin_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: [])
    plugins.refresh()
    try:
        with pytest.raises(plugins.PluginError, match=r"entry-point group provisioner\.providers is empty"):
            plugins.installed()
    finally:
        monkeypatch.undo()
        plugins.refresh()


def test_a_plugin_installed_from_a_folder_passes_the_contract_suite(toy_site: Path) -> None:
    done = _run(
        toy_site,
        "-m",
        "pytest",
        "-o",
        "addopts=",
        "-p",
        "no:cacheprovider",
        "tests/providers/test_contract.py",
        "tests/providers/test_contract_groups.py",
        "-k",
        "toy",
        extra_env={"PROVISIONER_CONTRACT_HARNESSES": "toy=toycloud.harness"},
    )

    assert done.returncode == 0, done.stdout + done.stderr
    summary = done.stdout.strip().splitlines()[-1]
    assert re.search(r"\b(1\d|[2-9]\d) passed", summary), summary  # every contract test ran over toy
    assert "skipped" not in summary and "failed" not in summary, summary


def test_simulate_launches_a_plugin_kind_from_its_own_catalog(toy_site: Path) -> None:
    scenario = toy_site / "toy.yaml"
    scenario.write_text(SCENARIO)

    done = _run(toy_site, "-m", "provisioner.cli", "simulate", str(scenario), "-o", "json")

    assert done.returncode == 0, done.stderr
    claims = json.loads(done.stdout)["nodeClaims"]
    # 3 CPUs fit only the medium type; the NodeClass allows only toy-1b.
    assert [(c["instanceType"], c["zone"], c["capacityType"]) for c in claims] == [
        ("toy.medium", "toy-1b", "on-demand")
    ]


def test_run_offers_a_plugin_s_options_and_builds_its_provider(toy_site: Path) -> None:
    done = _run(toy_site, "-m", "provisioner.cli", "run", "--help")
    assert done.returncode == 0, done.stderr
    assert "--toy-region" in done.stdout

    code = (
        "from provisioner.cloudprovider import registry\n"
        "from provisioner.cloudprovider.plugin import Wiring\n"
        "from datetime import datetime, UTC\n"
        "built = registry.build(['toy', 'fake'], {'toy_region': 'toy-1'}, "
        "Wiring(cluster_name='c', clock=lambda: datetime.now(UTC)), None)\n"
        "print(sorted(built), built['ToyNodeClass'] is not built['AWSNodeClass'] is built['GCPNodeClass'])\n"
        "print(sorted(t.name for t in built['ToyNodeClass'].region_instance_types()))\n"
    )
    done = _run(toy_site, "-c", code)
    assert done.returncode == 0, done.stderr
    kinds, types = done.stdout.splitlines()
    # The toy cloud takes its kind; the fake, asked for too, takes the kinds left.
    assert kinds == "['AWSNodeClass', 'GCPNodeClass', 'ToyNodeClass'] True"
    assert types == str(["toy.h100x8", "toy.medium", "toy.small"])


def test_catalog_reads_a_plugin_cloud_and_lists_it_in_its_help(toy_site: Path) -> None:
    done = _run(toy_site, "-m", "provisioner.cli", "catalog", "--help", extra_env={"COLUMNS": "400"})
    assert done.returncode == 0, done.stderr
    assert (
        "aws, gcp or toy (read through the provider), fake, or with --offline: aws, gcp, toy, karpenter-benchmark."
        in done.stdout
    )
    assert "Region. Default: AWS_REGION, us-east-1, us-central1, toy-1." in done.stdout

    done = _run(toy_site, "-m", "provisioner.cli", "catalog", "--cloud", "toy", "-o", "json")
    assert done.returncode == 0, done.stderr
    # The default region is its catalog's; the types are read through the plug-in, smallest first.
    assert [t["instanceType"] for t in json.loads(done.stdout)] == ["toy.small", "toy.medium", "toy.h100x8"]


def test_a_plugin_s_chart_pieces_are_generated_into_the_chart(toy_site: Path, tmp_path: Path) -> None:
    helm = pytest.importorskip("helm_python")
    chart = tmp_path / "provisioner"
    shutil.copytree(ROOT / "charts" / "provisioner", chart)

    done = _run(toy_site, "-m", "provisioner.cli", "chart", "--write", str(chart))

    assert done.returncode == 0, done.stderr
    toy = yaml.safe_load((chart / "providers" / "toy.yaml").read_text())
    assert toy["flags"] == [
        {
            "flag": "--toy-region",
            "value": "region",
            "required": "toy.region is required when cloud includes toy: where the toy cloud launches",
        }
    ]
    assert (chart / "crds" / "provisioner.sh_toynodeclasses.yaml").exists()
    assert yaml.safe_load((chart / "values.yaml").read_text())["toy"] == {"region": "", "identity": ""}
    # The templates, unchanged, now launch on the toy cloud: its flag, identity and NodeClass resource.
    values = {"clusterName": "c", "cloud": "toy", "toy": {"region": "toy-1", "identity": "toy-me"}}
    files = helm.Chart.load(str(chart)).render(values=values, name="p", namespace="ns")
    docs = [
        d for path, text in files.items() if path.endswith(".yaml") for d in yaml.safe_load_all(text) if d
    ]
    (deploy,) = [d for d in docs if d["kind"] == "Deployment"]
    args = deploy["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--cloud=toy" in args and "--toy-region=toy-1" in args
    (account,) = [d for d in docs if d["kind"] == "ServiceAccount"]
    assert account["metadata"]["annotations"] == {"toy.example/identity": "toy-me"}
    (role,) = [d for d in docs if d["kind"] == "ClusterRole"]
    assert any("toynodeclasses" in r["resources"] for r in role["rules"])
    with pytest.raises(helm.HelmError, match=r"toy\.region is required when cloud includes toy"):
        helm.Chart.load(str(chart)).render(values={**values, "toy": {}}, name="p", namespace="ns")
    with pytest.raises(helm.HelmError):  # the schema holds the declared pattern
        helm.Chart.load(str(chart)).render(
            values={**values, "toy": {"region": "r", "identity": "x"}}, name="p", namespace="ns"
        )


KARPENTER_TOY = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: toys}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.toy.example, kind: ToyMachineClass, name: toy}
      requirements:
        - {key: karpenter.toy.example/family, operator: In, values: [toy]}
---
apiVersion: karpenter.toy.example/v1
kind: ToyMachineClass
metadata: {name: toy}
spec: {zones: [toy-1b], hyperdrive: true}
"""


def test_karpenter_s_provider_for_a_plugin_cloud_is_imported_by_the_plugin_s_declaration(
    toy_site: Path,
) -> None:
    source = toy_site / "karpenter-toy.yaml"
    source.write_text(KARPENTER_TOY)

    done = _run(toy_site, "-m", "provisioner.cli", "templates", "import-karpenter", str(source))

    assert done.returncode == 0, done.stderr
    pool, node_class = yaml.safe_load_all(done.stdout)
    assert pool["spec"]["template"]["spec"]["nodeClassRef"] == {
        "group": "provisioner.sh",
        "kind": "ToyNodeClass",
        "name": "toy",
    }
    assert pool["spec"]["template"]["spec"]["requirements"] == [
        {"key": "provisioner.sh/instance-family", "operator": "In", "values": ["toy"]}
    ]
    assert node_class == {
        "apiVersion": "provisioner.sh/v1",
        "kind": "ToyNodeClass",
        "metadata": {"name": "toy"},
        "spec": {"zones": ["toy-1b"]},
    }
    assert (
        f"{source}:14: ToyMachineClass/toy: spec.hyperdrive: warning: not carried over: a Karpenter-only field"
        in (done.stderr.splitlines())
    )
