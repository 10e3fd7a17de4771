# CPU image with the pinned stack (constraints.txt keeps the CPU torch build).
FROM python:3.11-slim
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONUNBUFFERED=1
RUN apt-get update && apt-get install -y --no-install-recommends git && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/dlci
COPY constraints.txt pyproject.toml README.md ./
COPY dlci ./dlci
COPY entrypoint.py ./
RUN pip install --no-cache-dir --extra-index-url https://download.pytorch.org/whl/cpu -c constraints.txt '.[all]'
ENTRYPOINT ["python", "/opt/dlci/entrypoint.py"]
