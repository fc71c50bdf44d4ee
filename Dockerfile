# Slim image, non-root, healthcheck on /livez. The two README commands work inside it:
#   docker run IMAGE planner plan --model gpt3-175b --gpus 1024
#   docker run IMAGE sh -c 'pip install -e ".[dev]" -c requirements/dev.lock && python -m pytest'   (needs the tests/ copied in: see below)
FROM python:3.11-slim
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
RUN useradd --create-home --uid 10001 planner
WORKDIR /app
COPY pyproject.toml README.md ./
COPY requirements ./requirements
COPY planner ./planner
COPY api ./api
COPY hardware_profiles ./hardware_profiles
COPY tests ./tests
COPY bench ./bench
RUN pip install --no-cache-dir -e ".[dev]" -c requirements/dev.lock && chown -R planner /app
USER planner
EXPOSE 8000
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s \
  CMD python -c "import urllib.request,sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/livez', timeout=2).status != 200)"
CMD ["planner", "serve", "--host", "0.0.0.0", "--port", "8000"]
