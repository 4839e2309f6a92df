# Shardscope in a container, set up with the same steps as `make run`.
#   docker build -t shardscope . && docker run -p 8000:8000 shardscope
# Add --build-arg EXTRAS=verify to enable the "Run on real gloo" buttons (installs torch).
FROM python:3.11-slim
ARG EXTRAS=""
RUN apt-get update \
 && apt-get install -y --no-install-recommends make nodejs npm fonts-dejavu-core libcairo2 \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /srv/shardscope
COPY . .
RUN make setup && if [ -n "$EXTRAS" ]; then .venv/bin/pip install --no-cache-dir -e ".[$EXTRAS]"; fi
# inside the container the server must listen on every interface for -p to reach it
ENV HOST=0.0.0.0 PORT=8000
EXPOSE 8000
CMD ["make", "run"]
