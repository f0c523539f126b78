# The runner image: the bot and uv on a CUDA runtime base; each probe's container is made from it.
# Build: docker build --build-arg BASE=tbb-base:bookworm -t torch-bisect-bot .
# With a wheelhouse in .cache/docker/wheelhouse (scripts/ci-docker.sh makes one) the build
# needs no network; without one, pip fetches the dependencies from PyPI.
ARG BASE=nvidia/cuda:13.0.1-runtime-ubuntu24.04
FROM ${BASE}

# The CUDA bases ship no Python; a base that already has python3 and venv (tbb-base) skips apt.
RUN if ! python3 -c "import ensurepip, venv" 2>/dev/null; then \
        apt-get update && \
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
            python3 python3-venv ca-certificates && \
        rm -rf /var/lib/apt/lists/*; \
    fi

COPY . /opt/torch-bisect-bot/src
RUN cd /opt/torch-bisect-bot/src && \
    { test -f README.md || echo "# torch-bisect-bot" > README.md; } && \
    python3 -m venv /opt/torch-bisect-bot/venv && \
    if ls .cache/docker/wheelhouse/*.whl >/dev/null 2>&1; then \
        /opt/torch-bisect-bot/venv/bin/pip install --no-cache-dir --no-index \
            --find-links .cache/docker/wheelhouse torch-bisect-bot; \
    else \
        /opt/torch-bisect-bot/venv/bin/pip install --no-cache-dir .; \
    fi && \
    rm -rf /opt/torch-bisect-bot/src

# Environments are mounted at their host paths, and a uv environment's bin/python links to the
# host's base interpreter (pyenv puts it under /root/.pyenv): the unprivileged reproducer must be
# able to walk through /root to reach it. /root in this image holds nothing.
RUN chmod 0755 /root && mkdir -p /work && chmod 1777 /work

ENV PATH=/opt/torch-bisect-bot/venv/bin:/usr/local/bin:/usr/bin:/bin
# nobody: reproducers never run as root, even inside the container. The container sandbox
# starts its launcher as root with no capability but SETUID and SETGID, and the launcher
# drops the reproducer to this user (bot/adapters/container.py), so that the reproducer
# cannot signal or trace the launcher that ends it at its deadline.
USER 65534:65534
WORKDIR /work
CMD ["bisect-bot", "--help"]
