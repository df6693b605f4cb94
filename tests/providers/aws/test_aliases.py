"""AMI aliases to AWS's public SSM parameter names, pure."""

from __future__ import annotations

import pytest

from providers.aws import aliases


@pytest.mark.parametrize(
    ("alias", "key", "name"),
    [
        (
            "al2023@latest",
            "amd64/nvidia",
            "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/nvidia/recommended/image_id",
        ),
        (
            "al2023@v20240807",
            "arm64",
            "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/arm64/standard/"
            "amazon-eks-node-al2023-arm64-standard-1.31-v20240807/image_id",
        ),
        (
            "al2@latest",
            "amd64/nvidia",
            "/aws/service/eks/optimized-ami/1.31/amazon-linux-2-gpu/recommended/image_id",
        ),
        (
            "bottlerocket@1.20.3",
            "amd64/nvidia",
            "/aws/service/bottlerocket/aws-k8s-1.31-nvidia/x86_64/1.20.3/image_id",
        ),
    ],
    ids=["al2023-gpu", "al2023-pinned-arm", "al2-gpu", "bottlerocket-pinned-gpu"],
)
def test_parameters_name_the_published_paths(alias: str, key: str, name: str) -> None:
    assert aliases.parameters(alias, "1.31")[key] == name


@pytest.mark.parametrize("alias", ["windows@latest", "al2023", "al2023@", "@latest"])
def test_unknown_aliases_say_what_is_allowed(alias: str) -> None:
    with pytest.raises(aliases.AliasError, match="al2023@latest"):
        aliases.parameters(alias, "1.31")
