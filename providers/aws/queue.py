"""The interruption queue: SQS messages received in batches, parsed (providers.aws.interruption), and
deleted once read, whether acted on or not."""

from __future__ import annotations

import logging
from typing import Any

from providers.aws import interruption
from providers.aws.sdk import call

log = logging.getLogger("providers.aws")

MAX_BATCHES = 10
"""At most 100 messages a call, so a flood cannot starve the controller loop."""


def receive(sqs: Any, queue_url: str) -> list[tuple[interruption.ParsedMessage, str]]:
    """The interruptions waiting in the queue, with their message ids; every message read is deleted
    (unknown ones with a log line)."""
    parsed: list[tuple[interruption.ParsedMessage, str]] = []
    for _ in range(MAX_BATCHES):
        answer = call(
            "ReceiveMessage",
            sqs.receive_message,
            QueueUrl=queue_url,
            MaxNumberOfMessages=10,
            WaitTimeSeconds=0,
        )
        messages = answer.get("Messages") or []
        if not messages:
            break
        done: list[dict[str, str]] = []
        for m in messages:
            message = interruption.parse(m.get("Body", ""))
            if message is None:
                log.info("deleting message %s: not an interruption we act on", m.get("MessageId"))
            else:
                parsed.append((message, m.get("MessageId", "")))
            done.append({"Id": str(len(done)), "ReceiptHandle": m["ReceiptHandle"]})
        call("DeleteMessageBatch", sqs.delete_message_batch, QueueUrl=queue_url, Entries=done)
    return parsed
