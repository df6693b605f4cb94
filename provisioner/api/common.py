"""Pieces shared by every CRD model: the base model, object metadata, conditions, taints, requirements.

Field names follow Kubernetes and Karpenter's `karpenter.sh/v1` so YAML written for one reads in the other
after a group change. Validation here is structural and local to one object; whether a pool can ever
launch a node is the scheduler's business.
"""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Sequence
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any, Self

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from provisioner.api import durations, labels
from provisioner.api.kinds import NODECLASS_KINDS

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")


class FieldError(ValueError):
    """A ValueError raised by a validator that knows which field below the validated value is wrong.

    pydantic locates an error at the value its validator ran on (a list, a model); `path` (camelCase keys
    and list indexes, relative to that value) lets `provisioner.api.documents` point at the exact field and
    YAML line, e.g. the second requirement rather than the whole `requirements` list.
    """

    def __init__(self, message: str, *, path: tuple[str | int, ...] = ()) -> None:
        super().__init__(message)
        self.path = path


class FieldErrors(ValueError):
    """Every FieldError one validator found, so a list with three bad entries is reported three times,
    not once (`provisioner.api.documents` gives each its own line)."""

    def __init__(self, errors: Sequence[FieldError]) -> None:
        super().__init__("; ".join(str(e) for e in errors))
        self.errors = list(errors)


def raise_all(errors: Sequence[FieldError]) -> None:
    """Raise the errors found (one as itself, several together); nothing when there are none."""
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise FieldErrors(errors)


class Model(BaseModel):
    """Base of every API model: unknown fields are errors, YAML keys are camelCase."""

    model_config = ConfigDict(
        extra="forbid",
        populate_by_name=True,
        alias_generator=to_camel,
        use_attribute_docstrings=True,
    )

    def to_dict(self) -> dict[str, Any]:
        """The object as Kubernetes JSON: camelCase keys, unset fields left out."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


def cel_rules(*rules: tuple[str, str]) -> ConfigDict:
    """A model config carrying `x-kubernetes-validations` for its CRD schema: (CEL rule, message) pairs
    the API server checks on create and update. Each mirrors a validator of the model (which gives the
    friendlier message and runs in `templates validate`); a rule reads only bounded fields (a list it sits
    under has `maxItems`, a string it matches has `maxLength`) so the server's cost estimate accepts it."""
    return ConfigDict(
        json_schema_extra={"x-kubernetes-validations": [{"rule": r, "message": m} for r, m in rules]}
    )


def check_label_key(key: str) -> str:
    """A Kubernetes label key: optional DNS prefix, `/`, a name of at most 63 characters."""
    problem = _label_key_problem(key)
    if problem is not None:
        raise ValueError(problem)
    return key


def check_label_value(value: str) -> str:
    """A Kubernetes label value: at most 63 characters of [A-Za-z0-9-_.], alphanumeric at both ends."""
    problem = _label_value_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


# Remembered: every object's labels are checked each time it is validated, and a cluster repeats the same
# few keys and values on every node and claim. A verdict depends on the string alone.


@functools.lru_cache(maxsize=4096)
def _label_key_problem(key: str) -> str | None:
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return f"{key!r} is not a valid label key: prefix must be a DNS subdomain"
    if not name or len(name) > 63 or not _LABEL_NAME.match(name):
        return f"{key!r} is not a valid label key: name part must be 1-63 characters of [A-Za-z0-9-_.]"
    return None


@functools.lru_cache(maxsize=4096)
def _label_value_problem(value: str) -> str | None:
    if len(value) > 63 or not _LABEL_VALUE.match(value):
        return f"{value!r} is not a valid label value (at most 63 characters of [A-Za-z0-9-_.])"
    return None


def check_duration(value: str) -> str:
    """A Go duration or `Never` (`durations.DurationError`, a ValueError, otherwise)."""
    durations.parse_duration(value)
    return value


def check_duration_not_never(value: str) -> str:
    """A Go duration; `Never` is refused."""
    durations.parse_duration(value, allow_never=False)
    return value


def check_name(value: str) -> str:
    """A Kubernetes object name (DNS subdomain)."""
    if len(value) > 253 or not _DNS_SUBDOMAIN.match(value):
        raise ValueError(
            f"{value!r} is not a valid name: lowercase letters, digits, '-' and '.', at most 253 characters"
        )
    return value


# The patterns go to the JSON schema (and so the CRDs) only: the validators give the friendlier message.
Duration = Annotated[
    str,
    AfterValidator(check_duration),
    Field(json_schema_extra={"pattern": r"^(([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+|Never)$"}),
]
"""A Go duration (`30s`, `1h30m`, `720h`) or `Never`."""

FiniteDuration = Annotated[
    str,
    AfterValidator(check_duration_not_never),
    Field(json_schema_extra={"pattern": r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$"}),
]
"""A Go duration (`30s`, `1h30m`, `720h`); `Never` is not allowed."""

LabelKey = Annotated[str, AfterValidator(check_label_key)]
LabelValue = Annotated[str, AfterValidator(check_label_value)]
Labels = dict[LabelKey, LabelValue]


class ObjectMeta(BaseModel):
    """The part of Kubernetes' ObjectMeta we read. Server-set fields we do not use are kept, not refused."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, alias_generator=to_camel)

    name: Annotated[str, AfterValidator(check_name)] | None = None
    namespace: str | None = None
    labels: Labels = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: datetime | None = None
    deletion_timestamp: datetime | None = None
    finalizers: list[str] = Field(default_factory=list)
    owner_references: list[dict[str, Any]] = Field(default_factory=list)


class Named:
    """A top-level object whose `metadata.name` is required (pools, teams, departments). A mixin, not a
    model: the model keeps its own field order (apiVersion, kind, metadata, spec), which the CRDs show."""

    if TYPE_CHECKING:
        metadata: ObjectMeta

    @model_validator(mode="after")
    def _named(self) -> Self:
        if not self.metadata.name:
            raise FieldError("metadata.name is required", path=("metadata", "name"))
        return self

    @property
    def name(self) -> str:
        return self.metadata.name or ""


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class Condition(Model):
    """A metav1.Condition."""

    type: str
    """Condition type, CamelCase (`Launched`, `Registered`, `Initialized`, `Ready`, ...)."""
    status: ConditionStatus
    """`True`, `False` or `Unknown`."""
    reason: str = ""
    """CamelCase reason for the last transition."""
    message: str = ""
    """A sentence for people."""
    last_transition_time: datetime | None = None
    """When the status last changed."""
    observed_generation: int | None = None
    """The generation of the object this condition was computed for."""


class TaintEffect(StrEnum):
    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


class Taint(Model):
    """A node taint, as in core/v1."""

    key: LabelKey
    """Taint key, a label key such as `nvidia.com/gpu`."""
    value: str | None = None
    """Optional taint value."""
    effect: TaintEffect
    """`NoSchedule`, `PreferNoSchedule` or `NoExecute`."""
    time_added: datetime | None = None
    """Set by Kubernetes for NoExecute taints."""


class Operator(StrEnum):
    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"
    GT = "Gt"
    LT = "Lt"


class Requirement(Model):
    """A node selector requirement with Karpenter's `minValues`."""

    model_config = cel_rules(
        (
            "self.operator in ['In', 'NotIn'] ? (has(self.values) && size(self.values) > 0) : true",
            "operator In and NotIn need at least one value",
        ),
        (
            "self.operator in ['Exists', 'DoesNotExist'] ? (!has(self.values) || size(self.values) == 0) : true",
            "operator Exists and DoesNotExist take no values",
        ),
        (
            "self.operator in ['Gt', 'Lt'] ? (has(self.values) && size(self.values) == 1"
            " && self.values[0].matches('^[-+]?[0-9]+$')) : true",
            "operator Gt and Lt take exactly one integer value",
        ),
        (
            "has(self.minValues) ? self.operator != 'DoesNotExist' : true",
            "minValues is not allowed with operator DoesNotExist",
        ),
        (
            "(has(self.minValues) && self.operator == 'In') ? (has(self.values)"
            " && size(self.values) >= self.minValues) : true",
            "minValues must not be more than the values listed",
        ),
    )

    key: LabelKey
    """The node label the requirement is on, e.g. `provisioner.sh/gpu-name` or `topology.kubernetes.io/zone`."""
    operator: Operator
    """`In`, `NotIn`, `Exists`, `DoesNotExist`, `Gt` or `Lt`."""
    values: list[Annotated[str, Field(max_length=63)]] = Field(default_factory=list)
    """Values for In/NotIn (at least one); exactly one integer for Gt/Lt; none for Exists/DoesNotExist. Each
    at most 63 characters (a label value)."""
    min_values: int | None = Field(default=None, ge=1, le=50)
    """Least number of distinct values of this key the launch options must span (1..50), with any operator
    but DoesNotExist (Karpenter's); several requirements on one key: the largest applies. Default none."""

    @model_validator(mode="after")
    def _values_fit_operator(self) -> Requirement:
        op = self.operator
        errors: list[FieldError] = []
        if op in (Operator.IN, Operator.NOT_IN) and not self.values:
            errors.append(FieldError(f"operator {op.value} needs at least one value", path=("values",)))
        if op in (Operator.EXISTS, Operator.DOES_NOT_EXIST) and self.values:
            errors.append(
                FieldError(f"operator {op.value} takes no values, got {self.values}", path=("values",))
            )
        if op in (Operator.GT, Operator.LT):
            if len(self.values) != 1:
                errors.append(
                    FieldError(
                        f"operator {op.value} takes exactly one integer value, got {self.values}",
                        path=("values",),
                    )
                )
            elif not _is_integer(self.values[0]):
                errors.append(
                    FieldError(
                        f"operator {op.value} takes an integer value, got {self.values[0]!r}",
                        path=("values", 0),
                    )
                )
        if self.min_values is not None:
            if op == Operator.DOES_NOT_EXIST:
                errors.append(
                    FieldError(
                        "minValues is not allowed with operator DoesNotExist (a node without the key has no "
                        "value to count); it works with In, NotIn, Exists, Gt and Lt",
                        path=("minValues",),
                    )
                )
            elif op == Operator.IN and self.min_values > len(self.values):
                errors.append(
                    FieldError(
                        f"minValues {self.min_values} is more than the {len(self.values)} values listed",
                        path=("minValues",),
                    )
                )
        if self.key == labels.CAPACITY_TYPE and op in (Operator.IN, Operator.NOT_IN):
            for j, capacity_type in enumerate(self.values):
                if capacity_type not in labels.CAPACITY_TYPES:
                    close = difflib.get_close_matches(capacity_type, labels.CAPACITY_TYPES, n=1)
                    errors.append(
                        FieldError(
                            f"{labels.CAPACITY_TYPE}: unknown capacity type {capacity_type!r}"
                            + (f" (did you mean {close[0]!r}?)" if close else "")
                            + "; allowed: "
                            + ", ".join(labels.CAPACITY_TYPES),
                            path=("values", j),
                        )
                    )
        raise_all(errors)
        return self


def _is_integer(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def requirement_conflicts(requirements: list[Requirement]) -> list[str]:
    """Keys whose requirements no node could meet together, each with a sentence saying why.

    A pure, per-key check (In sets intersected, NotIn removed, Gt/Lt bounds crossed, Exists against
    DoesNotExist) used to refuse contradictory templates before any scheduling happens.
    """
    problems: list[str] = []
    by_key: dict[str, list[Requirement]] = {}
    for req in requirements:
        by_key.setdefault(req.key, []).append(req)
    for key, reqs in by_key.items():
        allowed: set[str] | None = None
        excluded: set[str] = set()
        exists = not_exists = False
        lower, upper = None, None
        for req in reqs:
            if req.operator == Operator.IN:
                allowed = set(req.values) if allowed is None else allowed & set(req.values)
                exists = True
            elif req.operator == Operator.NOT_IN:
                excluded |= set(req.values)
            elif req.operator == Operator.EXISTS:
                exists = True
            elif req.operator == Operator.DOES_NOT_EXIST:
                not_exists = True
            elif req.operator == Operator.GT:
                bound = int(req.values[0])
                lower = bound if lower is None else max(lower, bound)
                exists = True
            elif req.operator == Operator.LT:
                bound = int(req.values[0])
                upper = bound if upper is None else min(upper, bound)
                exists = True
        if exists and not_exists:
            problems.append(f"{key}: DoesNotExist contradicts a requirement that the label exist")
            continue
        if allowed is not None:
            remaining = allowed - excluded
            if lower is not None or upper is not None:
                remaining = {v for v in remaining if _within(v, lower, upper)}
            if not remaining:
                problems.append(
                    f"{key}: no value satisfies every requirement (In {sorted(allowed)}"
                    + (f", NotIn {sorted(excluded)}" if excluded else "")
                    + (f", Gt {lower}" if lower is not None else "")
                    + (f", Lt {upper}" if upper is not None else "")
                    + ")"
                )
                continue
        if lower is not None and upper is not None and upper - lower <= 1:
            problems.append(f"{key}: no integer is greater than {lower} and less than {upper}")
    return problems


def _within(value: str, lower: int | None, upper: int | None) -> bool:
    try:
        number = int(value)
    except ValueError:
        return False
    return (lower is None or number > lower) and (upper is None or number < upper)


class NodeClassReference(Model):
    """Which NodeClass launches the nodes: `group`, `kind` and `name`."""

    group: str = labels.GROUP
    """API group of the NodeClass; `provisioner.sh`."""
    kind: str
    """`AWSNodeClass` or `GCPNodeClass`."""
    name: Annotated[str, AfterValidator(check_name)]
    """Name of the NodeClass object."""

    @model_validator(mode="after")
    def _known_kind(self) -> NodeClassReference:
        errors: list[FieldError] = []
        if self.group != labels.GROUP:
            errors.append(
                FieldError(f"group {self.group!r} is not known; allowed: {labels.GROUP}", path=("group",))
            )
        if self.kind not in NODECLASS_KINDS:
            errors.append(
                FieldError(
                    f"kind {self.kind!r} is not known; allowed: {', '.join(NODECLASS_KINDS)}", path=("kind",)
                )
            )
        raise_all(errors)
        return self


def condition(conditions: list[Condition], type_: str) -> Condition | None:
    """The condition of that type, if present."""
    # A plain loop: this runs for every node many times a pass, and a generator costs more than the walk.
    for c in conditions:
        if c.type == type_:
            return c
    return None


def is_true(conditions: list[Condition], type_: str) -> bool:
    for c in conditions:
        if c.type == type_:
            return c.status == ConditionStatus.TRUE
    return False
