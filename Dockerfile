FROM python:3.11-slim
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1
RUN useradd --create-home planner
WORKDIR /app
COPY pyproject.toml README.md ./
COPY planner ./planner
COPY api ./api
COPY hardware_profiles ./hardware_profiles
RUN pip install --no-cache-dir -e .
USER planner
CMD ["planner", "validate"]
