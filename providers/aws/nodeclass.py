"""What an AWSNodeClass resolves to in the account: subnets, security groups, AMIs, the instance profile,
the EKS cluster nodes join, and the launch templates that put them together.

Owns every read behind an AWSNodeClass's selectors (DescribeSubnets, DescribeSecurityGroups,
DescribeImages, SSM parameters for AMI aliases, EKS DescribeCluster), the instance profile made for
`spec.role`, and the launch templates (named by a hash of their content, so a changed NodeClass or AMI
gets a new template and launches never race an in-place update). Resolutions are cached for the selector
TTL. Raises NodeClassNotReady when a selector finds nothing or a needed piece is missing, with the
NodeClass's name and field. What the template holds is providers.aws.launch's; the user data is
providers.aws.bootstrap's.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from providers.aws import aliases, bootstrap, efa, errors, instancetypes, launch
from providers.aws.model import AWSNodeClass, SelectorTerm
from providers.aws.sdk import SDK, TTLCache, call, tag_filters, translated
from provisioner.api import labels as wk
from provisioner.api.nodeclass import NodeClass
from provisioner.cloudprovider import CreateError, NodeClassNotReady

log = logging.getLogger("providers.aws")


@dataclass(frozen=True, slots=True)
class Resolved:
    """What an AWSNodeClass's selectors found."""

    subnets: tuple[launch.Subnet, ...]
    security_group_ids: tuple[str, ...]
    images: dict[str, str]
    """Image key (`amd64`, `arm64`, `amd64/nvidia`...; see launch.image_key) -> AMI id."""
    instance_profile: str


def aws_node_class(node_class: NodeClass) -> AWSNodeClass:
    """The NodeClass as an AWSNodeClass; NodeClassNotReady for any other kind."""
    if not isinstance(node_class, AWSNodeClass):
        raise NodeClassNotReady(
            f"node class {getattr(node_class, 'name', '?')!r} is a {node_class.kind}; "
            "the AWS provider launches only AWSNodeClass"
        )
    return node_class


class Resolver:
    """Resolves AWSNodeClasses against the account and keeps their launch templates."""

    def __init__(
        self,
        sdk: SDK,
        cache: TTLCache,
        *,
        cluster_name: str,
        selector_ttl: float,
        kubernetes_version: str | None,
        given_cluster: bootstrap.ClusterInfo | None,
    ) -> None:
        self._sdk = sdk
        self._cache = cache
        self._cluster_name = cluster_name
        self._selector_ttl = selector_ttl
        self._kubernetes_version = kubernetes_version
        self._given_cluster = given_cluster
        self._templates_known: set[str] = set()

    # --- selectors -------------------------------------------------------------------------------------

    def resolve(self, nc: AWSNodeClass) -> Resolved:
        """Subnets, security groups, AMIs and instance profile of the NodeClass as the account has them
        now (cached for the selector TTL, per spec)."""
        key = ("resolved", nc.name, nc.spec.model_dump_json())
        return self._cache.get(key, lambda: self._resolve_now(nc), ttl=self._selector_ttl)

    def _resolve_now(self, nc: AWSNodeClass) -> Resolved:
        spec = nc.spec
        subnets = {
            s["SubnetId"]: launch.Subnet(
                id=s["SubnetId"],
                zone=s["AvailabilityZone"],
                available_ips=int(s.get("AvailableIpAddressCount", 0)),
            )
            for term in spec.subnet_selector_terms
            for s in self._select("DescribeSubnets", "describe_subnets", "Subnets", "subnet-id", term)
        }
        if not subnets:
            raise NodeClassNotReady(
                f"AWSNodeClass {nc.name}: spec.subnetSelectorTerms matched no subnet in {self._sdk.region}"
            )
        groups = {
            g["GroupId"]
            for term in spec.security_group_selector_terms
            for g in self._select(
                "DescribeSecurityGroups", "describe_security_groups", "SecurityGroups", "group-id", term
            )
        }
        if not groups:
            raise NodeClassNotReady(
                f"AWSNodeClass {nc.name}: spec.securityGroupSelectorTerms matched no security group"
            )
        images = self._resolve_images(nc)
        if not images:
            raise NodeClassNotReady(
                f"AWSNodeClass {nc.name}: spec.amiSelectorTerms matched no available x86_64 or arm64 AMI"
            )
        profile = spec.instance_profile or self._ensure_instance_profile(nc)
        return Resolved(
            subnets=tuple(sorted(subnets.values(), key=lambda s: s.id)),
            security_group_ids=tuple(sorted(groups)),
            images=images,
            instance_profile=profile,
        )

    def _select(
        self, operation: str, method: str, key: str, id_filter: str, term: SelectorTerm
    ) -> list[dict[str, Any]]:
        filters: list[dict[str, Any]] = []
        if term.id:
            filters.append({"Name": id_filter, "Values": [term.id]})
        if term.name:
            filters.append(
                {"Name": "group-name" if key == "SecurityGroups" else "tag:Name", "Values": [term.name]}
            )
        filters.extend(tag_filters(term.tags))
        return self._sdk.paginate(operation, method, key, Filters=filters)

    def _resolve_images(self, nc: AWSNodeClass) -> dict[str, str]:
        """Image key -> AMI: for an alias, the EKS-optimized AMIs AWS publishes in SSM; otherwise the newest
        available AMI any term selects, per architecture."""
        aliased: dict[str, str] = {}
        found: dict[str, dict[str, Any]] = {}
        for term in nc.spec.ami_selector_terms:
            if term.alias:
                for key, image_id in self._resolve_alias(nc, term.alias).items():
                    aliased.setdefault(key, image_id)
                continue
            params: dict[str, Any] = {"Filters": [{"Name": "state", "Values": ["available"]}]}
            if term.id:
                params["ImageIds"] = [term.id]
            if term.name:
                params["Filters"].append({"Name": "name", "Values": [term.name]})
            params["Filters"].extend(tag_filters(term.tags))
            if term.owner:
                params["Owners"] = [term.owner]
            elif not term.id:
                params["Owners"] = ["self", "amazon"]
            with translated("DescribeImages"):
                try:
                    images = self._sdk.ec2.describe_images(**params).get("Images") or []
                except Exception as err:
                    if errors.error_code(err) in ("InvalidAMIID.NotFound", "InvalidAMIID.Malformed"):
                        images = []
                    else:
                        raise
            for image in images:
                arch = instancetypes.ARCHITECTURES.get(image.get("Architecture", ""))
                if arch is None:
                    continue
                best = found.get(arch)
                if best is None or (image.get("CreationDate", ""), image["ImageId"]) > (
                    best.get("CreationDate", ""),
                    best["ImageId"],
                ):
                    found[arch] = image
        return {**{arch: image["ImageId"] for arch, image in found.items()}, **aliased}

    def _resolve_alias(self, nc: AWSNodeClass, alias: str) -> dict[str, str]:
        cluster = self.cluster() if not self._kubernetes_version else None
        version = self._kubernetes_version or (cluster.version if cluster else None)
        if not version:
            raise NodeClassNotReady(
                f"AWSNodeClass {nc.name}: amiSelectorTerms alias {alias!r} needs the cluster's Kubernetes "
                f"version: EKS DescribeCluster({self._cluster_name!r}) did not give it; pass kubernetes_version "
                "or set PROVISIONER_KUBERNETES_VERSION"
            )
        try:
            names = aliases.parameters(alias, version)
        except aliases.AliasError as err:
            raise NodeClassNotReady(f"AWSNodeClass {nc.name}: amiSelectorTerms: {err}") from None
        by_name = {name: key for key, name in names.items()}
        out: dict[str, str] = {}
        ssm = self._sdk.client("ssm")
        chunk = list(by_name)
        for i in range(0, len(chunk), 10):  # GetParameters takes at most 10 names
            answer = call(
                "GetParameters", ssm.get_parameters, default=NodeClassNotReady, Names=chunk[i : i + 10]
            )
            for p in answer.get("Parameters") or []:
                out[by_name[p["Name"]]] = str(p["Value"])
        return out

    def _ensure_instance_profile(self, nc: AWSNodeClass) -> str:
        """The instance profile made for the NodeClass's role (created, or repaired to hold that role)."""
        role = nc.spec.role or ""
        digest = hashlib.sha256(f"{self._sdk.region}/{nc.name}".encode()).hexdigest()[:12]
        name = f"provisioner_{self._cluster_name}_{digest}"[:128]
        iam = self._sdk.client("iam")
        operation = "GetInstanceProfile"
        try:
            try:
                roles = [
                    r["RoleName"]
                    for r in iam.get_instance_profile(InstanceProfileName=name)["InstanceProfile"]["Roles"]
                ]
            except Exception as err:
                if errors.error_code(err) != "NoSuchEntity":
                    raise
                operation = "CreateInstanceProfile"
                iam.create_instance_profile(InstanceProfileName=name, Tags=launch.tag_list(self._owned(nc)))
                roles = []
            if roles != [role]:
                operation = "AddRoleToInstanceProfile"
                for old in roles:
                    iam.remove_role_from_instance_profile(InstanceProfileName=name, RoleName=old)
                iam.add_role_to_instance_profile(InstanceProfileName=name, RoleName=role)
                log.info("instance profile %s now holds role %s (node class %s)", name, role, nc.name)
        except Exception as err:
            error = errors.translate(err, operation=operation, default=NodeClassNotReady)
            if isinstance(error, NodeClassNotReady):
                raise NodeClassNotReady(
                    f"AWSNodeClass {nc.name}: cannot make an instance profile for spec.role {role!r}: {error}"
                ) from err
            raise error from err
        return name

    def cluster(self) -> bootstrap.ClusterInfo | None:
        """The cluster as nodes must know it: the constructor's arguments, else EKS DescribeCluster
        (cached; None when EKS has no such cluster)."""
        if self._given_cluster is not None:
            return self._given_cluster

        def load() -> bootstrap.ClusterInfo | None:
            eks = self._sdk.client("eks")
            try:
                raw = eks.describe_cluster(name=self._cluster_name)["cluster"]
            except Exception as err:
                if errors.error_code(err) == "ResourceNotFoundException":
                    return None
                raise errors.translate(err, operation="DescribeCluster", default=NodeClassNotReady) from err
            return bootstrap.ClusterInfo(
                name=self._cluster_name,
                endpoint=str(raw.get("endpoint", "")),
                ca_bundle=str((raw.get("certificateAuthority") or {}).get("data", "")),
                service_cidr=(raw.get("kubernetesNetworkConfig") or {}).get("serviceIpv4Cidr"),
                version=raw.get("version"),
            )

        return self._cache.get("cluster", load)

    # --- launch templates ------------------------------------------------------------------------------

    def templates(
        self,
        nc: AWSNodeClass,
        resolved: Resolved,
        keys: set[str],
        node_labels: Mapping[str, str] | None = None,
    ) -> dict[str, str]:
        """Image key -> the name of an existing launch template for the NodeClass as it resolves now, its
        nodes registering with `node_labels` (`bootstrap.user_data`)."""
        if not resolved.instance_profile:
            raise NodeClassNotReady(f"AWSNodeClass {nc.name}: no instance profile or role")
        family = bootstrap.family_of(nc)
        cluster = self.cluster() if bootstrap.needs_cluster(family) else None
        if bootstrap.needs_cluster(family) and cluster is None:
            raise NodeClassNotReady(
                f"AWSNodeClass {nc.name}: {family} nodes need the cluster's endpoint and CA to join: EKS "
                f"DescribeCluster({self._cluster_name!r}) found no cluster; pass cluster_endpoint and "
                "cluster_ca_bundle, or use amiFamily Custom with your own user data"
            )
        user_data = bootstrap.user_data(
            family, cluster=cluster, custom=nc.spec.user_data, node_labels=node_labels
        )
        out = {}
        for key in sorted(keys):
            image, efa_interfaces = efa.split(key)
            data = launch.launch_template_data(
                nc,
                image_id=resolved.images[image],
                efa_interfaces=efa_interfaces,
                security_group_ids=list(resolved.security_group_ids),
                instance_profile=resolved.instance_profile,
                cluster_name=self._cluster_name,
                user_data=user_data,
            )
            name = launch.template_name(self._cluster_name, nc, data)
            if name not in self._templates_known:
                self._create_template(name, data, nc)
                self._templates_known.add(name)
            out[key] = name
        return out

    def forget_templates(self, names: set[str]) -> None:
        """Someone deleted these templates: the next `templates` call makes them again."""
        self._templates_known -= names

    def _create_template(self, name: str, data: dict[str, Any], nc: AWSNodeClass) -> None:
        try:
            self._sdk.ec2.create_launch_template(
                LaunchTemplateName=name,
                LaunchTemplateData=data,
                TagSpecifications=[
                    {"ResourceType": "launch-template", "Tags": launch.tag_list(self._owned(nc))}
                ],
            )
            log.info("created launch template %s for node class %s", name, nc.name)
        except Exception as err:
            if errors.error_code(err) == "InvalidLaunchTemplateName.AlreadyExistsException":
                return  # same name, same content (the name hashes the content): nothing to do
            raise errors.translate(err, operation="CreateLaunchTemplate", default=CreateError) from err

    def _owned(self, nc: AWSNodeClass) -> dict[str, str]:
        """Tags of what is made for a NodeClass (instance profile, launch templates)."""
        return {**launch.cluster_tags(self._cluster_name), f"{wk.GROUP}/nodeclass": nc.name}
