# syntax=docker/dockerfile:1
FROM python:3.12.8-slim-bookworm AS build
WORKDIR /src
COPY setup.cfg pyproject.toml README.md ./
COPY exporter ./exporter
COPY rules ./rules
COPY templates ./templates
RUN python -m venv /opt/elasticache-exporter \
 && /opt/elasticache-exporter/bin/pip install --no-cache-dir --disable-pip-version-check .

FROM python:3.12.8-slim-bookworm
COPY --from=build /opt/elasticache-exporter /opt/elasticache-exporter
USER 65532:65532
EXPOSE 9769
HEALTHCHECK --interval=30s --timeout=3s --retries=3 \
  CMD ["/opt/elasticache-exporter/bin/python", "-c", "import urllib.request,sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:9769/-/healthy', timeout=2).status != 200)"]
ENTRYPOINT ["/opt/elasticache-exporter/bin/elasticache-exporter"]
CMD ["serve"]
