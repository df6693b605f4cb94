"""The text checks of parsed pods and nodes: the fields the decision code matches, joins and hashes on
(names, labels, annotations, selectors, topology keys, tolerations, taints) must be strings, or absent.

The API server's schema guarantees it; a scenario file or a lax server may not, and one such object taken
as it is would break every solve and snapshot after it. A failed check is a ValueError naming the object
and the field path, the first bad field in document order. Pure; `state.objects` parses, this checks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from provisioner.state.terms import (
    LabelSelector,
    PodAffinityTerm,
    SelectorRequirement,
    TaintValue,
    Toleration,
    TopologySpread,
)


class CheckedPod(Protocol):
    """What the checks read of a parsed pod (`state.objects.Pod`, which calls them while it parses)."""

    @property
    def key(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def namespace(self) -> str: ...
    @property
    def node_name(self) -> str | None: ...
    @property
    def labels(self) -> Mapping[str, str]: ...
    @property
    def annotations(self) -> Mapping[str, str]: ...
    @property
    def node_selector(self) -> Mapping[str, str]: ...
    @property
    def tolerations(self) -> tuple[Toleration, ...]: ...
    @property
    def required_node_terms(self) -> tuple[tuple[SelectorRequirement, ...], ...]: ...
    @property
    def topology_spread(self) -> tuple[TopologySpread, ...]: ...
    @property
    def affinity_required(self) -> tuple[PodAffinityTerm, ...]: ...
    @property
    def affinity_preferred(self) -> tuple[PodAffinityTerm, ...]: ...
    @property
    def anti_affinity_required(self) -> tuple[PodAffinityTerm, ...]: ...
    @property
    def anti_affinity_preferred(self) -> tuple[PodAffinityTerm, ...]: ...


class CheckedNode(Protocol):
    """What the checks read of a parsed node (`state.objects.Node`)."""

    @property
    def name(self) -> str: ...
    @property
    def provider_id(self) -> str | None: ...
    @property
    def labels(self) -> Mapping[str, str]: ...
    @property
    def annotations(self) -> Mapping[str, str]: ...
    @property
    def taints(self) -> tuple[TaintValue, ...]: ...


def require_text(kind: str, ident: object, fields: Iterable[tuple[str, object]]) -> None:
    """Raise a ValueError naming the first field (path, value) that is neither a string nor None."""
    for path, value in fields:
        if value is not None and not isinstance(value, str):
            raise ValueError(f"{kind} {ident}: {path}: expected a string, got {type(value).__name__}")


def map_fields(path: str, mapping: Mapping[Any, Any]) -> list[tuple[str, object]]:
    """A map's values then its keys, as fields; none when all are text (the usual case: the paths are
    only spelt out for a map with a bad entry, so the first one is still named)."""
    for k, v in mapping.items():
        if not (k is None or isinstance(k, str)) or not (v is None or isinstance(v, str)):
            break
    else:
        return []
    return [(f"{path}.{k}", v) for k, v in mapping.items()] + [(f"{path} key {k!r}", k) for k in mapping]


def selector_fields(path: str, selector: LabelSelector | None) -> list[tuple[str, object]]:
    if selector is None:
        return []
    return [
        *map_fields(f"{path}.matchLabels", dict(selector.match_labels)),
        *(
            (f"{path}.matchExpressions[{j}].{f}", v)
            for j, e in enumerate(selector.match_expressions)
            for f, v in (("key", e.key), ("operator", e.operator))
        ),
    ]


def term_fields(path: str, terms: Sequence[PodAffinityTerm]) -> list[tuple[str, object]]:
    """The text fields of pod (anti-)affinity terms: the solver hashes them into its groups."""
    out: list[tuple[str, object]] = []
    for i, t in enumerate(terms):
        at = f"{path}[{i}]"
        out.append((f"{at}.topologyKey", t.topology_key))
        out += [(f"{at}.namespaces[{j}]", ns) for j, ns in enumerate(t.namespaces)]
        out += selector_fields(f"{at}.labelSelector", t.label_selector)
        out += selector_fields(f"{at}.namespaceSelector", t.namespace_selector)
    return out


def check_pod(pod: CheckedPod, *, metadata: bool = True, spec: bool = True) -> None:
    """The pod's text fields, and `minDomains` an integer. `metadata` / `spec` False: that part was parsed
    from the very same objects and checked before (a new version of the pod reuses it), so only the rest
    (always `spec.nodeName`) is checked; the first bad field named is the one a full check names."""
    require_text(
        "Pod",
        pod.key,
        [
            *((("metadata.name", pod.name), ("metadata.namespace", pod.namespace)) if metadata else ()),
            ("spec.nodeName", pod.node_name),
            *(
                (
                    *map_fields("metadata.labels", pod.labels),
                    *map_fields("metadata.annotations", pod.annotations),
                )
                if metadata
                else ()
            ),
            *(_spec_fields(pod) if spec else ()),
        ],
    )
    if not spec:
        return
    for i, term in enumerate(pod.required_node_terms):
        for j, r in enumerate(term):
            if not r.key:  # text when present (checked above); a requirement without a key means nothing
                raise ValueError(
                    f"Pod {pod.key}: spec.affinity.nodeAffinity...nodeSelectorTerms[{i}].matchExpressions[{j}]"
                    ".key: required"
                )
    for i, t in enumerate(pod.topology_spread):
        if t.min_domains is not None and (
            not isinstance(t.min_domains, int) or isinstance(t.min_domains, bool)
        ):
            raise ValueError(
                f"Pod {pod.key}: spec.topologySpreadConstraints[{i}].minDomains: expected an integer, "
                f"got {type(t.min_domains).__name__}"
            )


def _spec_fields(pod: CheckedPod) -> list[tuple[str, object]]:
    return [
        *map_fields("spec.nodeSelector", pod.node_selector),
        *(
            (f"spec.tolerations[{i}].{f}", v)
            for i, t in enumerate(pod.tolerations)
            for f, v in (
                ("key", t.key),
                ("operator", t.operator),
                ("value", t.value),
                ("effect", t.effect),
            )
        ),
        *(
            (f"spec.affinity.nodeAffinity...nodeSelectorTerms[{i}].matchExpressions[{j}].{f}", v)
            for i, term in enumerate(pod.required_node_terms)
            for j, r in enumerate(term)
            for f, v in (("key", r.key), ("operator", r.operator))
        ),
        *(
            (f"spec.topologySpreadConstraints[{i}].{f}", v)
            for i, t in enumerate(pod.topology_spread)
            for f, v in (
                ("topologyKey", t.topology_key),
                ("whenUnsatisfiable", t.when_unsatisfiable),
                ("nodeAffinityPolicy", t.node_affinity_policy),
                ("nodeTaintsPolicy", t.node_taints_policy),
                *((f"matchLabelKeys[{j}]", k) for j, k in enumerate(t.match_label_keys)),
            )
        ),
        *(
            field
            for i, t in enumerate(pod.topology_spread)
            for field in selector_fields(
                f"spec.topologySpreadConstraints[{i}].labelSelector", t.label_selector
            )
        ),
        *term_fields("spec.affinity.podAffinity.required...", pod.affinity_required),
        *term_fields("spec.affinity.podAffinity.preferred...", pod.affinity_preferred),
        *term_fields("spec.affinity.podAntiAffinity.required...", pod.anti_affinity_required),
        *term_fields("spec.affinity.podAntiAffinity.preferred...", pod.anti_affinity_preferred),
    ]


def check_node(node: CheckedNode) -> None:
    """The node's name, provider id, labels, annotations and taints."""
    require_text(
        "Node",
        node.name,
        [
            ("metadata.name", node.name),
            ("spec.providerID", node.provider_id),
            *map_fields("metadata.labels", node.labels),
            *map_fields("metadata.annotations", node.annotations),
            *(
                (f"spec.taints[{i}].{f}", v)
                for i, t in enumerate(node.taints)
                for f, v in (("key", t.key), ("effect", t.effect), ("value", t.value))
            ),
        ],
    )
