"""Interruption messages over real HTTP: EventBridge events delivered into an SQS queue (by moto's
EventBridge, and sent directly as EventBridge would) read into interruption events, then deleted."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from providers.aws import AWSProvider, interruption
from testkit.providers.aws import world
from testkit.providers.aws.stack import Stack


def spot_warning(instance_id: str) -> dict[str, Any]:
    return {
        "version": "0",
        "id": "1e5527d7-bb36-4607-3370-4164db56a40e",
        "detail-type": "EC2 Spot Instance Interruption Warning",
        "source": "aws.ec2",
        "account": "123456789012",
        "time": "2026-11-20T12:00:00Z",
        "region": "us-east-1",
        "resources": [f"arn:aws:ec2:us-east-1b:instance/{instance_id}"],
        "detail": {"instance-id": instance_id, "instance-action": "terminate"},
    }


def rebalance(instance_id: str) -> dict[str, Any]:
    return {
        "detail-type": "EC2 Instance Rebalance Recommendation",
        "source": "aws.ec2",
        "time": "2026-11-20T12:00:01Z",
        "detail": {"instance-id": instance_id},
    }


def scheduled_change(instance_id: str) -> dict[str, Any]:
    return {
        "detail-type": "AWS Health Event",
        "source": "aws.health",
        "time": "2026-11-20T12:00:02Z",
        "detail": {
            "service": "EC2",
            "eventTypeCategory": "scheduledChange",
            "eventTypeCode": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
            "affectedEntities": [{"entityValue": instance_id}],
        },
    }


def state_change(instance_id: str, state: str) -> dict[str, Any]:
    return {
        "detail-type": "EC2 Instance State-change Notification",
        "source": "aws.ec2",
        "time": "2026-11-20T12:00:03Z",
        "detail": {"instance-id": instance_id, "state": state},
    }


@pytest.fixture
def queue_url(stack: Stack) -> str:
    url: str = stack.client("sqs").create_queue(QueueName="interruptions")["QueueUrl"]
    return url


@pytest.fixture
def instance(stack: Stack, account: world.World) -> tuple[str, str]:
    """(instance id, zone) of a running instance."""
    ec2 = stack.client("ec2", direct=True)
    raw = ec2.run_instances(
        ImageId=account.image_id,
        MinCount=1,
        MaxCount=1,
        InstanceType="m5.large",
        SubnetId=account.subnets["us-east-1b"],
    )["Instances"][0]
    return raw["InstanceId"], raw["Placement"]["AvailabilityZone"]


def queue_depth(stack: Stack, queue_url: str) -> int:
    attrs = stack.client("sqs").get_queue_attributes(
        QueueUrl=queue_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(attrs["ApproximateNumberOfMessages"]) + int(attrs["ApproximateNumberOfMessagesNotVisible"])


def test_each_kind_of_message_becomes_an_interruption_event_and_is_deleted(
    stack: Stack,
    new_provider: Callable[..., AWSProvider],
    queue_url: str,
    instance: tuple[str, str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("INFO", logger="providers.aws")
    instance_id, zone = instance
    sqs = stack.client("sqs")
    for body in (
        spot_warning(instance_id),
        rebalance(instance_id),
        scheduled_change(instance_id),
        state_change(instance_id, "stopping"),
        state_change(instance_id, "running"),  # not an interruption
        {"source": "aws.s3", "detail-type": "Object Created", "detail": {}},  # unknown
    ):
        sqs.send_message(QueueUrl=queue_url, MessageBody=json.dumps(body))
    sqs.send_message(QueueUrl=queue_url, MessageBody="not json at all")
    provider = new_provider(interruption_queue_url=queue_url)

    events = provider.interruptions()

    provider_id = f"aws:///{zone}/{instance_id}"
    assert sorted((e.provider_id, e.kind) for e in events) == sorted(
        [
            (provider_id, "spot-interruption"),
            (provider_id, "rebalance"),
            (provider_id, "scheduled-change"),
            (provider_id, "state-change"),
        ]
    )
    assert queue_depth(stack, queue_url) == 0
    assert provider.interruptions() == []
    assert sum("not an interruption" in r.getMessage() for r in caplog.records) == 3


def test_spot_warnings_routed_by_an_eventbridge_rule_reach_the_provider(
    stack: Stack, new_provider: Callable[..., AWSProvider], queue_url: str, instance: tuple[str, str]
) -> None:
    instance_id, zone = instance
    sqs, events = stack.client("sqs"), stack.client("events")
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    events.put_rule(
        Name="spot-interruptions",
        EventPattern=json.dumps(
            {"source": ["aws.ec2"], "detail-type": ["EC2 Spot Instance Interruption Warning"]}
        ),
    )
    events.put_targets(Rule="spot-interruptions", Targets=[{"Id": "queue", "Arn": queue_arn}])
    warning = spot_warning(instance_id)
    events.put_events(
        Entries=[
            {
                "Source": warning["source"],
                "DetailType": warning["detail-type"],
                "Detail": json.dumps(warning["detail"]),
                "Resources": warning["resources"],
            }
        ]
    )

    got = new_provider(interruption_queue_url=queue_url).interruptions()

    assert [(e.provider_id, e.kind) for e in got] == [(f"aws:///{zone}/{instance_id}", "spot-interruption")]


def test_a_provider_without_a_queue_reports_no_interruptions(provider: AWSProvider) -> None:
    assert provider.interruptions() == []


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        (spot_warning("i-1"), "spot-interruption"),
        (rebalance("i-1"), "rebalance"),
        (scheduled_change("i-1"), "scheduled-change"),
        (state_change("i-1", "terminated"), "state-change"),
        (state_change("i-1", "pending"), None),
        (
            {**scheduled_change("i-1"), "detail": {"service": "RDS", "eventTypeCategory": "scheduledChange"}},
            None,
        ),
        ({"detail-type": "EC2 Spot Instance Interruption Warning", "source": "aws.ec2", "detail": {}}, None),
    ],
    ids=["spot", "rebalance", "scheduled", "terminated", "pending", "health-not-ec2", "no-instance"],
)
def test_parse_reads_the_kind_of_each_message(body: dict[str, Any], kind: str | None) -> None:
    parsed = interruption.parse(json.dumps(body))

    assert (parsed.kind if parsed else None) == kind
    if parsed:
        assert parsed.instance_ids == ("i-1",)


RULES = json.loads(
    (Path(__file__).resolve().parents[3] / "deploy" / "aws" / "interruption-rules.json").read_text()
)["rules"]


def test_the_documented_eventbridge_rules_route_each_kind_into_the_queue(
    stack: Stack, new_provider: Callable[..., AWSProvider], queue_url: str, instance: tuple[str, str]
) -> None:
    """README "Production": the rules of deploy/aws/interruption-rules.json, put in moto's EventBridge with
    the queue as target, deliver every kind the provider reads (and nothing of another kind)."""
    instance_id, zone = instance
    sqs, events = stack.client("sqs"), stack.client("events")
    arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    for rule in RULES:
        events.put_rule(Name=rule["name"], EventPattern=json.dumps(rule["eventPattern"]))
        events.put_targets(Rule=rule["name"], Targets=[{"Id": "queue", "Arn": arn}])
    sent = [
        spot_warning(instance_id),
        rebalance(instance_id),
        scheduled_change(instance_id),
        state_change(instance_id, "stopping"),
        {"detail-type": "AWS API Call via CloudTrail", "source": "aws.ec2", "detail": {}},
    ]
    events.put_events(
        Entries=[
            {"Source": e["source"], "DetailType": e["detail-type"], "Detail": json.dumps(e["detail"])}
            for e in sent
        ]
    )

    got = new_provider(interruption_queue_url=queue_url).interruptions()

    parsed = [interruption.parse(json.dumps(e)) for e in sent]
    expected = {p.kind for p in parsed if p is not None}
    assert len(expected) == 4
    assert {e.kind for e in got} == expected
    assert {e.provider_id for e in got} == {f"aws:///{zone}/{instance_id}"}
