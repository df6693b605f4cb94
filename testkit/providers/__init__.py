"""The cloud side of the kit: the provider contract harnesses (harness_<id>) and the clouds' stand-ins."""
