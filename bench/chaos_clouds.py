"""The clouds of the reliability campaign (bench/chaos.py): what `provisioner run` is pointed at, what
stands in for the kubelet, and what the books are read from afterwards.

- `fake`: `--cloud fake --fake-state FILE`; the controller registers the Nodes itself (as Karpenter's kwok
  provider) and the fake cloud counts launches per claim in its file.
- `aws`: `--cloud aws` through boto3 to moto's server behind the tests' fault-and-price proxy
  (tests/providers/aws), the account built as the AWS tests build it; the campaign's kubelet registers a
  Node for every live instance it lists, and the books are read straight from moto: every instance tagged
  with the cluster (terminated ones too) is one launch for the NodeClaim its tag names.

Each worker process of the campaign starts moto once (testkit.providers.aws.stack) and resets it per run.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from typing import Any, Protocol

from providers.fake import saved
from provisioner.api import labels as wk
from provisioner.clock import RealClock
from provisioner.cloudprovider.protocol import Instance

CLOUDS = ("fake", "aws")


class Cloud(Protocol):
    name: str
    cluster: str

    def flags(self) -> list[str]:
        """`provisioner run` flags naming this cloud."""
        ...

    def env(self) -> dict[str, str]: ...

    def node_class(self) -> dict[str, Any]: ...

    def zones(self) -> list[str] | None: ...

    def sync(self) -> None:
        """What the cloud's kubelets do between two polls (register Nodes of new instances)."""
        ...

    def live(self) -> list[str]:
        """The NodeClaim named by each live instance of ours (one entry per instance)."""
        ...

    def launches(self) -> dict[str, int]:
        """Instances ever launched per NodeClaim name."""
        ...

    def close(self) -> None: ...


class FakeCloud:
    name = "fake"
    cluster = "chaos"

    def __init__(self, state_path: str) -> None:
        self.state_path = state_path

    def flags(self) -> list[str]:
        return ["--cloud", "fake", "--fake-state", self.state_path]

    def env(self) -> dict[str, str]:
        return {}

    def node_class(self) -> dict[str, Any]:
        from testkit.controllers.world import node_class

        return node_class()

    def zones(self) -> list[str] | None:
        return None

    def sync(self) -> None:
        return None

    def _saved(self) -> tuple[list[Instance], dict[str, int]]:
        """The fake cloud's journal, replayed (nothing before the first launch)."""
        try:
            return saved.load(self.state_path)
        except FileNotFoundError:
            return [], {}

    def live(self) -> list[str]:
        return [str(i.nodeclaim) for i in self._saved()[0]]

    def launches(self) -> dict[str, int]:
        return self._saved()[1]

    def close(self) -> None:
        return None


class AWSCloud:
    name = "aws"

    def __init__(self, backend: Any) -> None:
        from testkit.controllers.standins import TestKubelet
        from testkit.providers.aws import world as aws_world
        from testkit.providers.aws.stack import shared_stack
        from testkit.providers.harness_aws import make_provider

        # moto's server logs every request it answers.
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        self.cluster = aws_world.CLUSTER
        self.stack = shared_stack()
        self.stack.reset()
        self.account = aws_world.build(self.stack)
        self.ec2 = self.stack.client("ec2", direct=True)
        # The kubelets of the launched instances: a Ready Node (with its GPUs) for each live one.
        self.kubelet = TestKubelet(
            backend, RealClock(), {}, poll=make_provider(self.stack, cluster_name=self.cluster)
        )

    def flags(self) -> list[str]:
        from testkit.providers.aws.stack import REGION

        return ["--cloud", "aws", "--aws-region", REGION, "--aws-endpoint", self.stack.url]

    def env(self) -> dict[str, str]:
        from testkit.providers.aws.stack import CREDENTIALS

        return {
            "AWS_ACCESS_KEY_ID": CREDENTIALS["aws_access_key_id"],
            "AWS_SECRET_ACCESS_KEY": CREDENTIALS["aws_secret_access_key"],
            "MOTO_EC2_LOAD_DEFAULT_AMIS": os.environ.get("MOTO_EC2_LOAD_DEFAULT_AMIS", "false"),
        }

    def node_class(self) -> dict[str, Any]:
        doc: dict[str, Any] = self.account.node_class.to_dict()
        return doc

    def zones(self) -> list[str] | None:
        return list(self.account.zones)

    def sync(self) -> None:
        self.kubelet.sync()

    def _ours(self, states: list[str] | None) -> list[dict[str, Any]]:
        filters = [{"Name": f"tag:{wk.CLUSTER}", "Values": [self.cluster]}]
        if states:
            filters.append({"Name": "instance-state-name", "Values": states})
        found = self.ec2.describe_instances(Filters=filters)["Reservations"]
        return [i for r in found for i in r["Instances"]]

    @staticmethod
    def _claim(instance: dict[str, Any]) -> str:
        return next((t["Value"] for t in instance.get("Tags", []) if t["Key"] == wk.NODECLAIM), "")

    def live(self) -> list[str]:
        return [self._claim(i) for i in self._ours(["pending", "running", "stopping", "stopped"])]

    def launches(self) -> dict[str, int]:
        return dict(Counter(self._claim(i) for i in self._ours(None)))

    def close(self) -> None:
        self.stack.proxy.reset()


def make(name: str, *, backend: Any, tmp: str) -> Cloud:
    if name == "fake":
        return FakeCloud(os.path.join(tmp, "fake-cloud.json"))
    if name == "aws":
        return AWSCloud(backend)
    raise ValueError(f"cloud {name!r} is not known; allowed: {', '.join(CLOUDS)}")
