#!/usr/bin/env bash
# Prepares Docker for the container-mode tests, idempotently: the engine, a local base image
# made without pulling (no registry is reachable), and the runner image from ./Dockerfile.
# Usage: scripts/ci-docker.sh            (from the repository root; needs root)
# Env:   TBB_BASE_IMAGE (tbb-base:bookworm), TBB_IMAGE (torch-bisect-bot:latest),
#        TBB_SUITE (bookworm), TBB_MIRROR (http://deb.debian.org/debian)
set -euo pipefail

BASE_IMAGE=${TBB_BASE_IMAGE:-tbb-base:bookworm}
IMAGE=${TBB_IMAGE:-torch-bisect-bot:latest}
SUITE=${TBB_SUITE:-bookworm}
MIRROR=${TBB_MIRROR:-http://deb.debian.org/debian}
CACHE=.cache/docker
ROOTFS_TAR=$CACHE/rootfs-$SUITE.tar
WHEELHOUSE=$CACHE/wheelhouse
PIP=${PIP:-.tools/bin/pip}

log() { printf '[ci-docker %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

install_tools() {
    local missing=()
    command -v dockerd >/dev/null || missing+=(docker.io)
    command -v debootstrap >/dev/null || missing+=(debootstrap)
    if ((${#missing[@]})); then
        log "installing ${missing[*]}"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
}

start_engine() {
    if docker info >/dev/null 2>&1; then
        log "docker engine already running"
        return
    fi
    log "starting dockerd"
    mkdir -p "$CACHE"
    # No bridge and no iptables: containers here only ever run with network_mode none, and we
    # must not create a network in a private address range on the CI host.
    nohup dockerd --bridge=none --iptables=false --ip-forward=false \
        >"$CACHE/dockerd.log" 2>&1 &
    for _ in $(seq 1 60); do
        docker info >/dev/null 2>&1 && { log "dockerd is up"; return; }
        sleep 1
    done
    tail -20 "$CACHE/dockerd.log" >&2
    log "dockerd did not come up in 60 s"
    exit 1
}

build_base() {
    if docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
        log "base image $BASE_IMAGE exists"
        return
    fi
    if [[ ! -s $ROOTFS_TAR ]]; then
        # minbase plus python3-venv: enough to install the bot offline from the wheelhouse.
        log "debootstrap $SUITE (a few minutes)"
        local rootfs
        rootfs=$(mktemp -d "$PWD/$CACHE/rootfs.XXXXXX")
        debootstrap --variant=minbase --include=python3,python3-venv \
            "$SUITE" "$rootfs" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 \
            || { tail -20 "$CACHE/debootstrap.log" >&2; rm -rf "$rootfs"; exit 1; }
        rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
        tar -C "$rootfs" -cf "$ROOTFS_TAR.tmp" . && mv "$ROOTFS_TAR.tmp" "$ROOTFS_TAR"
        rm -rf "$rootfs"
    fi
    log "importing $ROOTFS_TAR as $BASE_IMAGE"
    docker import "$ROOTFS_TAR" "$BASE_IMAGE" >/dev/null
}

build_wheelhouse() {
    # The bot and its dependencies as wheels, fetched on the host from the package registry,
    # so the image build itself needs no network.
    log "building the wheelhouse"
    rm -rf "$WHEELHOUSE" && mkdir -p "$WHEELHOUSE"
    [[ -x $PIP ]] || { python3 -m venv .tools && .tools/bin/pip install -q uv; }
    "$PIP" wheel --quiet --wheel-dir "$WHEELHOUSE" .
}

build_image() {
    build_wheelhouse
    log "building $IMAGE from Dockerfile (BASE=$BASE_IMAGE, no network)"
    DOCKER_BUILDKIT=0 docker build --quiet --network none \
        --build-arg BASE="$BASE_IMAGE" -t "$IMAGE" . >/dev/null
    log "built $IMAGE"
}

main() {
    local started=$SECONDS
    mkdir -p "$CACHE"
    install_tools
    start_engine
    build_base
    build_image
    log "done in $((SECONDS - started)) s"
}

main "$@"
