"""provisioner: an autoscaling provisioner for GPU fleets on Kubernetes."""

__version__ = "0.1.0"
