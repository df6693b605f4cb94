"""The controller's least IAM policy (deploy/aws/controller-policy.json, what the README's Production
section tells operators to attach) is enough for every call the AWS provider makes, and moto proves it:
with moto's IAM enforcement on (`/moto-api/reset-auth`), the provider runs as an IAM user holding only
that policy, straight against moto (its signature checks need the request unaltered, so not through the
fault proxy). A policy missing one action is refused, so the check can fail."""

from __future__ import annotations

import fnmatch
import json
import re
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from providers.aws import AWSProvider
from provisioner.cloudprovider import CloudProviderError
from testkit.builders import node_claim
from testkit.providers.aws import world
from testkit.providers.aws.stack import REGION, Stack

POLICY = Path(__file__).resolve().parents[3] / "deploy" / "aws" / "controller-policy.json"
NODE_ROLE = "provisioner-node-role"


def policy() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(POLICY.read_text())
    return loaded


def _set_auth(stack: Stack, count: str) -> None:
    request = urllib.request.Request(
        f"{stack.moto_url}/moto-api/reset-auth",
        data=count.encode(),
        method="POST",
        headers={"Content-Type": "text/plain"},  # a form type would leave moto an empty body
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        answer.read()


@pytest.fixture
def enforce(stack: Stack) -> Iterator[Callable[[], None]]:
    """Turns moto's IAM enforcement on (after the test's setup); always off again afterwards."""
    yield lambda: _set_auth(stack, "0")
    _set_auth(stack, "inf")


def principal(stack: Stack, name: str, document: dict[str, Any]) -> tuple[boto3.Session, list[str]]:
    """A session of an IAM user holding only `document`, and the IAM actions it calls (recorded)."""
    iam = stack.client("iam", direct=True)
    iam.create_user(UserName=name)
    arn = iam.create_policy(PolicyName=name, PolicyDocument=json.dumps(document))["Policy"]["Arn"]
    iam.attach_user_policy(UserName=name, PolicyArn=arn)
    key = iam.create_access_key(UserName=name)["AccessKey"]
    session = boto3.Session(
        region_name=REGION, aws_access_key_id=key["AccessKeyId"], aws_secret_access_key=key["SecretAccessKey"]
    )
    called: list[str] = []

    def record(model: Any, **_: Any) -> None:
        called.append(f"{model.service_model.signing_name}:{model.name}")

    session.events.register("before-call", record)
    return session, called


def provider_for(stack: Stack, session: boto3.Session, **kw: Any) -> AWSProvider:
    return AWSProvider(
        region=REGION,
        cluster_name=world.CLUSTER,
        endpoint_url=stack.moto_url,
        session=session,
        max_attempts=1,
        **kw,
    )


def exercise(provider: AWSProvider, account: world.World) -> None:
    """What the controller does with a cloud: read types, launch (a NodeClass with a role, so the
    instance profile is made), list, get, read interruptions, terminate."""
    node_class = world.node_class(instanceProfile=None, role=NODE_ROLE)
    types = {t.name: t for t in provider.instance_types(node_class)}
    claim = node_claim("iam-check", ["m5.large"], node_class=node_class)
    instance = provider.create(claim, [types["m5.large"]], node_class)
    assert [i.provider_id for i in provider.list()] == [instance.provider_id]
    assert provider.get(instance.provider_id).provider_id == instance.provider_id
    provider.interruptions()
    provider.delete(instance.provider_id)


@pytest.fixture
def cloud(stack: Stack) -> tuple[world.World, str]:
    """The account, the node role and an interruption queue holding one message, made before enforcing."""
    account = world.build(stack)
    stack.client("iam", direct=True).create_role(RoleName=NODE_ROLE, AssumeRolePolicyDocument="{}")
    sqs = stack.client("sqs", direct=True)
    queue = sqs.create_queue(QueueName="interruptions")["QueueUrl"]
    sqs.send_message(QueueUrl=queue, MessageBody=json.dumps({"source": "aws.ec2", "detail-type": "other"}))
    return account, queue


def test_the_documented_policy_allows_every_call_the_provider_makes(
    stack: Stack, cloud: tuple[world.World, str], enforce: Callable[[], None]
) -> None:
    account, queue = cloud
    session, called = principal(stack, "controller", policy())
    provider = provider_for(stack, session, interruption_queue_url=queue)
    enforce()

    exercise(provider, account)

    allowed = [a for s in policy()["Statement"] for a in s["Action"]]
    assert all(any(fnmatch.fnmatchcase(c, a) for a in allowed) for c in called), called
    assert {"ec2:CreateFleet", "iam:CreateInstanceProfile", "sqs:ReceiveMessage"} <= set(called)


@pytest.mark.parametrize(
    "missing", ["ec2:CreateFleet", "iam:AddRoleToInstanceProfile", "ec2:DescribeSubnets"]
)
def test_a_policy_missing_one_action_is_refused(
    stack: Stack, cloud: tuple[world.World, str], enforce: Callable[[], None], missing: str
) -> None:
    account, queue = cloud
    narrowed = policy()
    for statement in narrowed["Statement"]:
        statement["Action"] = [a for a in statement["Action"] if a != missing]
    session, _ = principal(stack, "narrow", narrowed)
    provider = provider_for(stack, session, interruption_queue_url=queue)
    enforce()

    with pytest.raises(CloudProviderError):
        exercise(provider, account)


SERVICES = ("ec2", "eks", "iam", "pricing", "sqs", "ssm")
OUR_OWN_NAMES = {"iam:CreateGroup"}
"""Operations whose snake_case name is one of our own methods (`CloudProvider.create_group`), not a call."""


def named_operations() -> set[str]:
    """Every API operation the provider's source names, as `service:Operation`: the operation names its
    error translation carries ("CreateFleet") and the boto3 methods it calls (`remove_role_from_instance_profile`),
    read against botocore's own service models. Paths the exercise above does not take (a reservation's
    RunInstances, an AMI alias's SSM parameters, the EKS lookup) are covered this way."""
    import botocore.session
    from botocore import xform_name

    models = botocore.session.get_session()
    source = "\n".join(
        p.read_text() for p in (Path(__file__).resolve().parents[3] / "providers" / "aws").glob("*.py")
    )
    words = set(re.findall(r"\b[A-Za-z][A-Za-z_]+\b", source))
    found: set[str] = set()
    for service in SERVICES:
        for operation in models.get_service_model(service).operation_names:
            if operation in words or (xform_name(operation) in words and "_" in xform_name(operation)):
                found.add(f"{service}:{operation}")
    return found - OUR_OWN_NAMES


def test_every_operation_the_provider_names_is_in_the_policy() -> None:
    allowed = [a for s in policy()["Statement"] for a in s["Action"]]
    named = named_operations()
    assert {"ec2:RunInstances", "ssm:GetParameters", "eks:DescribeCluster"} <= named
    assert sorted(n for n in named if not any(fnmatch.fnmatchcase(n, a) for a in allowed)) == []
