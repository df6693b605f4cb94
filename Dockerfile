# The controller image: `provisioner run` as a non-root user on a read-only root filesystem.
# Build: docker build -t provisioner:dev .
FROM python:3.11-slim AS build
WORKDIR /src
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY pyproject.toml README.md constraints.txt ./
COPY provisioner ./provisioner
COPY providers ./providers
RUN python -m venv /venv && /venv/bin/pip install --no-compile -c constraints.txt . && \
    find /venv -name '__pycache__' -prune -exec rm -rf {} +

FROM python:3.11-slim
LABEL org.opencontainers.image.title="provisioner" \
      org.opencontainers.image.description="Autoscaling provisioner for GPU fleets on Kubernetes" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /venv /venv
# No bytecode written at run time (the root filesystem is read-only); logs unbuffered.
ENV PATH=/venv/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["provisioner"]
CMD ["run"]
