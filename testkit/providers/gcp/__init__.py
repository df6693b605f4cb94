"""Test stand-ins for Google Compute Engine: a local REST server the real google-cloud-compute client
talks to over HTTP, and the machine and accelerator fixtures it serves."""
