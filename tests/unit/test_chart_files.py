"""The chart's plug-in files (charts/provisioner/providers/NAME.yaml, the plug-ins' part of
values.schema.json) are exactly what the installed plug-ins declare, as the CRDs are what the models
generate; and no template names a cloud (provisioner.cloudprovider.chart_files)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from provisioner.api import crds
from provisioner.cli.main import app
from provisioner.cloudprovider import chart_files, registry
from provisioner.cloudprovider.plugin import ChartPieces, ProviderPlugin

CHART = Path(__file__).resolve().parents[2] / "charts" / "provisioner"
REFRESH = "run: provisioner chart --write charts/provisioner"


def _generated() -> dict[str, str]:
    return chart_files.chart_files(
        registry.plugins(),
        schema=(CHART / chart_files.SCHEMA_FILE).read_text(),
        values=(CHART / chart_files.VALUES_FILE).read_text(),
    )


def test_committed_plugin_files_equal_what_the_plugins_declare() -> None:
    generated = _generated()
    committed = {
        f"{chart_files.PROVIDERS_DIR}/{p.name}": p.read_text()
        for p in (CHART / chart_files.PROVIDERS_DIR).glob("*.yaml")
    }

    assert sorted(committed) == sorted(n for n in generated if n.startswith(chart_files.PROVIDERS_DIR)), (
        REFRESH
    )
    for name, text in generated.items():
        current = committed[name] if name in committed else (CHART / name).read_text()
        assert current == text, f"{name} is stale; {REFRESH}"


def test_no_template_names_a_cloud() -> None:
    names = [p.name for p in registry.plugins()]
    identities = [a for p in registry.plugins() for a in p.chart.annotations]
    for template in (CHART / "templates").iterdir():
        text = template.read_text()
        for word in [*names, *identities]:
            assert not re.search(rf"(?<![\w.-]){re.escape(word)}(?![\w-])", text), f"{template.name}: {word}"


def test_a_plugin_s_file_holds_its_flags_resources_identity_and_shard_rule() -> None:
    aws = yaml.safe_load(_generated()["providers/aws.yaml"])
    fake = yaml.safe_load(_generated()["providers/fake.yaml"])

    assert aws["flags"][0] == {
        "flag": "--aws-region",
        "value": "region",
        "required": "aws.region is required when cloud includes aws: the region the controller launches in",
    }
    assert [f["flag"] for f in aws["flags"][1:]] == ["--aws-interruption-queue", "--aws-endpoint"]
    assert "required" not in aws["flags"][1]
    assert aws["nodeClassResources"] == ["awsnodeclasses"]
    assert aws["serviceAccountAnnotations"] == {"eks.amazonaws.com/role-arn": "roleArn"}
    assert (aws["devOnly"], aws["noShards"]) == (False, "")
    assert (fake["devOnly"], fake["nodeVerbs"], fake["noShards"]) == (
        True,
        ["create"],
        "its instances live in one process",
    )


def _plugin(**chart: object) -> ProviderPlugin:
    return ProviderPlugin(name="toy", build=lambda options, wiring: None, chart=ChartPieces(**chart))  # type: ignore[arg-type,return-value]


@pytest.mark.parametrize(
    ("chart", "says"),
    [
        ({"values": {"region": ""}, "flags": {"--toy-region": "regoin"}}, "chart values regoin are used"),
        ({"values": {"region": ""}, "required": {"region": ""}}, "required chart values region set no"),
    ],
    ids=["undeclared-key", "required-without-flag"],
)
def test_chart_pieces_that_do_not_hold_together_are_refused_naming_the_plugin(
    chart: dict[str, object], says: str
) -> None:
    with pytest.raises(ValueError, match=rf"plug-in 'toy': {says}"):
        chart_files.provider_data(_plugin(**chart))


def test_the_schema_allows_every_plugin_name_and_holds_a_new_plugin_s_values(tmp_path: Path) -> None:
    toy = _plugin(values={"region": "", "role": ""}, patterns={"role": "^r-[0-9]+$"})
    schema = chart_files.values_schema(
        {"properties": {"cloud": {}, "clusterName": {}, "replicas": {}}}, [*registry.plugins(), toy]
    )

    assert list(schema["properties"]) == ["cloud", "clusterName", "aws", "gcp", "toy", "replicas"]
    assert schema["properties"]["toy"]["properties"] == {
        "region": {"type": "string"},
        "role": {"type": "string", "pattern": "^r-[0-9]+$"},
    }
    pattern = schema["properties"]["cloud"]["pattern"]
    assert all(re.fullmatch(pattern, c) for c in ("toy", "aws,toy", "fake,gcp,toy"))
    assert not re.fullmatch(pattern, "azure") and not re.fullmatch(pattern, "aws,")
    values = chart_files.values_text("cloud: aws\n", [toy])
    assert yaml.safe_load(values) == {"cloud": "aws", "toy": {"region": "", "role": ""}}
    assert chart_files.values_text(values, [toy]) == values, "a section present is left as written"


def test_the_chart_command_prints_the_plugin_files_and_writes_a_whole_chart(tmp_path: Path) -> None:
    printed = CliRunner().invoke(app, ["chart"])
    assert printed.exit_code == 0, printed.stderr
    assert [d["name"] for d in yaml.safe_load_all(printed.stdout)] == ["aws", "fake", "gcp"]

    target = tmp_path / "chart"
    target.mkdir()
    for name in (chart_files.SCHEMA_FILE, chart_files.VALUES_FILE):
        (target / name).write_text((CHART / name).read_text())
    written = CliRunner().invoke(app, ["chart", "--write", str(target)])
    assert written.exit_code == 0, written.stderr
    assert {p.name for p in (target / "crds").iterdir()} == set(crds.files())
    assert {p.name for p in (target / "providers").iterdir()} == {"aws.yaml", "fake.yaml", "gcp.yaml"}
    assert (target / chart_files.SCHEMA_FILE).read_text() == (CHART / chart_files.SCHEMA_FILE).read_text()

    missing = CliRunner().invoke(app, ["chart", "--write", str(tmp_path / "nothing")])
    assert missing.exit_code == 2
    assert missing.stderr.startswith(f"error: --write: {tmp_path / 'nothing'} is not a chart folder")
