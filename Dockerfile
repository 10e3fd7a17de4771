# dlci's GitHub docker action: the pinned stack of constraints.txt with the CPU build of torch.
#
#   docker build -t dlci .                                                   # CPU (what action.yml builds)
#   docker build --build-arg TORCH_INDEX=https://pypi.org/simple --build-arg ONNXRUNTIME=onnxruntime-gpu \
#                -t dlci:cuda .                                              # GPU variant (dlci-pool.yml's gpu shards)
#   docker build --build-arg BASE_IMAGE=dlci-base:bookworm ...               # a base made without a registry
#                                                                            # (scripts/image_check.py: debootstrap)
#
# Multi-arch: python:3.11-slim, the PyTorch CPU index and every pinned wheel exist for linux/amd64 and linux/arm64,
# except tensorflow-cpu (amd64 only): the arm64 image leaves the tensorflow extra out. No step downloads anything
# but Debian packages and wheels. docs/action.md explains each choice below.
# The base: any Debian-like image with Python 3.11, pip and apt (python:3.11-slim, or Debian bookworm's own python3
# imported from a debootstrap folder where no registry is reachable: scripts/image_check.py builds that one).
# Pinned by digest (a tag can be moved to other content); refresh with
# `docker buildx imagetools inspect python:3.11-slim` (the index digest covers amd64 and arm64).
ARG BASE_IMAGE=python:3.11-slim@sha256:9c900dea9e8fb7e16277c179b555cc72d29a352dbc33cff48ad5a0412fd5bfc7
FROM ${BASE_IMAGE}

# torch is installed alone, first, from the PyTorch wheel index named here (default: CPU builds for amd64 and
# arm64, ~200 MB instead of several GB of CUDA packages). Keep TORCH_VERSION equal to the torch pin in
# constraints.txt (tests/test_action_files.py checks it).
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
ARG TORCH_VERSION=2.13.0
# onnxruntime (CPU) or onnxruntime-gpu (the CUDA execution provider, same version as the pin; it replaces the
# onnxruntime module, so it is installed instead of, never beside, the CPU package). The GPU variant also gets
# cuda-bindings for torch's CUDA major version: TVM compiles its CUDA kernels with NVRTC through it.
ARG ONNXRUNTIME=onnxruntime
# 1: harvest the test sources at build time into the image (~3 minutes once, saved on every run).
ARG DLCI_PREWARM=1

# PIP_BREAK_SYSTEM_PACKAGES: a Debian-packaged Python refuses system-wide installs (PEP 668); the image is the
# environment, there is no system Python to protect (python:3.11-slim ignores the variable).
# DLCI_SANDBOX=require: the pull request's code runs as the user dlci-sandbox (made below), never as root, or the
# action refuses to run (docs/action.md, "Trust").
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_BREAK_SYSTEM_PACKAGES=1 \
    DLCI_CACHE_DIR=/opt/dlci-cache \
    DLCI_SANDBOX=require

# git: dlci reads the diff and checks out the base and head revisions. g++: torch.compile's inductor compiles its
# CPU kernels. safe.directory: a docker action runs as root (GitHub's rule, see below) on a workspace owned by the
# runner's user, and git refuses such a checkout unless told otherwise; the container is thrown away after the step.
# Debian's package versions are not pinned: the base image's release fixes them and old versions leave the mirror.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends git g++ \
    && rm -rf /var/lib/apt/lists/* \
    && git config --system --add safe.directory '*' \
    && useradd --system --create-home --home-dir /home/dlci-sandbox --shell /usr/sbin/nologin dlci-sandbox

# The dependencies before the source, so that a self-hosted runner's layer cache survives code changes: a stub
# package carries the metadata (pyproject.toml) while pip installs the stack, then leaves.
COPY constraints.txt pyproject.toml README.md /dlci/
RUN pip install --no-cache-dir --no-deps --index-url "${TORCH_INDEX}" "torch==${TORCH_VERSION}" \
    && mkdir -p /dlci/dlci && touch /dlci/dlci/__init__.py \
    && extras=all,github \
    && if [ "$(uname -m)" != x86_64 ]; then extras=torch,onnx,tvm,openvino,onnx2torch,github; fi \
    && pip install --no-cache-dir -c /dlci/constraints.txt "/dlci[${extras}]" \
    && if [ "${ONNXRUNTIME}" != onnxruntime ]; then \
         ort="$(sed -n 's/^onnxruntime==//p' /dlci/constraints.txt)" \
         && cuda="$(python -c "import torch; print((torch.version.cuda or '0').split('.')[0])")" \
         && pip uninstall -y onnxruntime \
         && pip install --no-cache-dir --no-deps "${ONNXRUNTIME}==${ort}" \
         && pip install --no-cache-dir "cuda-bindings==${cuda}.*"; fi \
    && pip uninstall -y dlci \
    && rm -rf /dlci/dlci

COPY dlci /dlci/dlci
COPY entrypoint.py /dlci/entrypoint.py
RUN pip install --no-cache-dir --no-deps /dlci \
    && pip check \
    && python -c "import dlci.cli, dlci.github"

# Harvests are cached by library versions; a failure here only means the action harvests at run time. Readable,
# not writable, by the sandbox user: a pull request's scan reads them and writes its own elsewhere (dlci.cache).
RUN mkdir -p "${DLCI_CACHE_DIR}" \
    && if [ "${DLCI_PREWARM}" = 1 ]; then dlci sources > /dev/null || echo "dlci: prewarm failed, harvesting at run time"; fi \
    && chmod -R a+rX,go-w "${DLCI_CACHE_DIR}"

# No USER: GitHub runs docker actions as the image's default user and documents that it must be root, or the
# mounted GITHUB_WORKSPACE is not writable; the entrypoint (which holds the token) runs the scan as dlci-sandbox.
# No WORKDIR: GitHub mounts the workspace and makes it the working directory.
ENTRYPOINT ["python", "/dlci/entrypoint.py"]
