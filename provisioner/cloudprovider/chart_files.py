"""What the Helm chart (charts/provisioner) holds of each provider plug-in, generated from its declaration
(`ProviderPlugin.chart`, a `ChartPieces`, and its NodeClass kinds) so that no template names a cloud.

Owns three things `provisioner chart --write charts/provisioner` writes, and their tests compare with the
committed chart:
- `providers/NAME.yaml`, one per plug-in, which the templates read with `.Files.Glob "providers/*.yaml"`
  (`provisioner.plugins` in templates/_helpers.tpl): the `run` flags and the values they come from (the
  required ones with their message), the NodeClass resources RBAC lets the controller read, the verbs on
  Nodes it adds, the ServiceAccount annotations (the cloud identity), whether `shards` is refused;
- the plug-ins' part of values.schema.json: the `cloud` names allowed and each plug-in's values object;
- a plug-in's section of values.yaml when the file has none (an existing section, with its comments, is
  left as written; tests/chart/test_chart.py checks it holds the declared keys).
Pure: plug-ins and texts in, texts out.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import yaml

from provisioner.cloudprovider import registry
from provisioner.cloudprovider.plugin import ProviderPlugin

PROVIDERS_DIR = "providers"
"""The chart's folder of plug-in files."""
SCHEMA_FILE = "values.schema.json"
VALUES_FILE = "values.yaml"
HEADER = (
    "# Generated from the {name} plug-in's declaration (its ProviderPlugin's ChartPieces and NodeClass\n"
    "# kinds) by `provisioner chart --write charts/provisioner`; do not edit. The templates read it.\n"
)


def provider_data(plugin: ProviderPlugin) -> dict[str, Any]:
    """The content of the plug-in's `providers/NAME.yaml`. Raises ValueError when its chart pieces name a
    values key it does not declare."""
    pieces = plugin.chart
    used = [*pieces.flags.values(), *pieces.required, *pieces.patterns, *pieces.annotations.values()]
    unknown = sorted({key for key in used if key not in pieces.values})
    if unknown:
        raise ValueError(
            f"plug-in {plugin.name!r}: chart values {', '.join(unknown)} are used but not declared in "
            f"ChartPieces.values (declared: {', '.join(pieces.values) or 'none'})"
        )
    passed = set(pieces.flags.values())
    unpassed = [key for key in pieces.required if key not in passed]
    if unpassed:
        raise ValueError(
            f"plug-in {plugin.name!r}: required chart values {', '.join(unpassed)} set no `run` flag "
            "(ChartPieces.flags)"
        )
    flags: list[dict[str, str]] = []
    for flag, key in pieces.flags.items():
        entry = {"flag": flag, "value": key}
        if key in pieces.required:
            why = pieces.required[key]
            entry["required"] = f"{plugin.name}.{key} is required when cloud includes {plugin.name}" + (
                f": {why}" if why else ""
            )
        flags.append(entry)
    return {
        "name": plugin.name,
        "devOnly": plugin.dev_only is not None,
        "flags": flags,
        "nodeClassResources": [k.plural for k in plugin.nodeclasses],
        "nodeVerbs": list(pieces.node_verbs),
        "serviceAccountAnnotations": dict(pieces.annotations),
        "noShards": pieces.no_shards,
    }


def provider_files(plugins: Sequence[ProviderPlugin]) -> dict[str, str]:
    """`providers/NAME.yaml` (relative to the chart) -> its text, for every plug-in."""
    return {
        f"{PROVIDERS_DIR}/{p.name}.yaml": HEADER.format(name=p.name)
        + yaml.safe_dump(provider_data(p), sort_keys=False, width=120)
        for p in plugins
    }


def values_schema(schema: dict[str, Any], plugins: Sequence[ProviderPlugin]) -> dict[str, Any]:
    """`schema` (values.schema.json) with the plug-ins' part written from their declarations: `cloud`
    allows their names (alone or comma-separated), and each plug-in with values has an object of them
    (strings, to the declared patterns), where it was, else after `clusterName`."""
    names = [p.name for p in registry.ordered(plugins)]
    one = "|".join(re.escape(n) for n in names)
    properties: dict[str, Any] = dict(schema.get("properties", {}))
    properties["cloud"] = {
        "type": "string",
        "description": f"{', '.join(names)}, or a comma-separated list of them.",
        "pattern": f"^({one})(,({one}))*$",
    }
    for plugin in plugins:
        if not plugin.chart.values:
            continue
        properties[plugin.name] = {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                key: {
                    "type": "string",
                    **({"pattern": plugin.chart.patterns[key]} if key in plugin.chart.patterns else {}),
                }
                for key in plugin.chart.values
            },
        }
    order = list(schema.get("properties", {}))
    anchor = order.index("clusterName") + 1 if "clusterName" in order else len(order)
    new = [n for n in properties if n not in order]
    order = [*order[:anchor], *new, *order[anchor:]]
    return {**schema, "properties": {n: properties[n] for n in order}}


def schema_text(schema: dict[str, Any]) -> str:
    """values.schema.json's text: two-space indented JSON."""
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def values_text(text: str, plugins: Sequence[ProviderPlugin]) -> str:
    """values.yaml with a section for each plug-in that declares values and has none yet (appended)."""
    present = yaml.safe_load(text) or {}
    for plugin in plugins:
        if plugin.chart.values and plugin.name not in present:
            text = (
                text.rstrip("\n")
                + f"\n\n# The {plugin.name} plug-in's values (`cloud: {plugin.name}`).\n"
                + yaml.safe_dump({plugin.name: dict(plugin.chart.values)}, sort_keys=False)
            )
    return text


def chart_files(plugins: Sequence[ProviderPlugin], *, schema: str, values: str) -> dict[str, str]:
    """Every file of a chart the plug-ins' declarations write (relative path -> text), given the chart's
    current values.schema.json and values.yaml texts."""
    return {
        **provider_files(plugins),
        SCHEMA_FILE: schema_text(values_schema(json.loads(schema), plugins)),
        VALUES_FILE: values_text(values, plugins),
    }
