"""GCP attachable GPUs (T4, V100 on n1): catalog types named `<machine type>-<gpu>x<count>`, e.g.
`n1-standard-8-t4x1`. Owns the translation between such a name and what `instances.insert` needs."""

from __future__ import annotations

import re

from provisioner.cloudprovider import catalog

_ATTACHED = re.compile(r"^(?P<machine>.+)-(?P<gpu>[a-z0-9]+)x(?P<count>\d+)$")

_ATTACHABLE = {
    "t4": "nvidia-tesla-t4",
    "v100": "nvidia-tesla-v100",
    "p100": "nvidia-tesla-p100",
    "p4": "nvidia-tesla-p4",
}


def gcp_machine(instance_type: str) -> tuple[str, str | None, int]:
    """(machine type, accelerator type to attach or None, count) for a GCP catalog name.

    `n1-standard-8-t4x1` -> (`n1-standard-8`, `nvidia-tesla-t4`, 1); `a3-highgpu-8g` -> (`a3-highgpu-8g`,
    None, 0) since its GPUs come with the machine type; an unknown plain name is returned as is.
    """
    shape = catalog.shape("gcp", instance_type)
    if shape is not None:
        machine = shape.machine_type or instance_type
        if shape.attach_accelerator and shape.accelerator_type:
            return machine, shape.accelerator_type, shape.accelerator_count
        return machine, None, 0
    match = _ATTACHED.match(instance_type)
    if match and match.group("gpu") in _ATTACHABLE:
        return match.group("machine"), _ATTACHABLE[match.group("gpu")], int(match.group("count"))
    return instance_type, None, 0


def gcp_attached_name(machine_type: str, gpu_name: str, count: int) -> str:
    """The catalog name of a machine type with attached GPUs: (`n1-standard-8`, `t4`, 1) ->
    `n1-standard-8-t4x1`. `gpu_name` may be the label form (`t4`) or GCE's (`nvidia-tesla-t4`)."""
    short = catalog.ACCELERATOR_SHORT_NAMES.get(gpu_name, gpu_name)
    return f"{machine_type}-{short}x{count}"
