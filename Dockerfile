# Slim image running the web app and REST API as a non-root user, installed like the README does.
FROM python:3.11-slim
WORKDIR /srv/kvplan
COPY pyproject.toml README.md Makefile ./
COPY kvcore ./kvcore
COPY app ./app
COPY templates ./templates
COPY static ./static
RUN apt-get update && apt-get install -y --no-install-recommends make \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --uid 10001 kvplan \
    && chown -R kvplan /srv/kvplan
USER kvplan
RUN make .venv/.web
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=3s CMD python -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/api/v1/healthz', timeout=2).status == 200 else 1)"
CMD ["make", "run", "HOST=0.0.0.0"]
