"""`python -m provisioner.cli`: the same command as the `provisioner` script."""

from provisioner.cli.main import main

main()
