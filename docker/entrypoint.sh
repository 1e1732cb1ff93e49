#!/bin/sh
# Start the broker; every CHRONOLOG_CFG_<NAME> environment variable becomes
# `--override <name>=<value>` with the name lower-cased and `_` turned into `.`
# (CHRONOLOG_CFG_ADVERTISED_LISTENERS=PLAINTEXT://broker:9092 ->
# advertised.listeners=PLAINTEXT://broker:9092). Kafka setting names contain no
# underscores, so the mapping is unambiguous. Logs are JSON lines unless
# CHRONOLOG_LOG_FORMAT=text. Extra arguments are passed through.
set -eu

set -- --data-dir "${CHRONOLOG_DATA_DIR:-/data}" \
       --host "${CHRONOLOG_HOST:-0.0.0.0}" \
       --port "${CHRONOLOG_PORT:-9092}" \
       --log-format "${CHRONOLOG_LOG_FORMAT:-json}" \
       --log-level "${CHRONOLOG_LOG_LEVEL:-INFO}" "$@"

for var in $(env | sed -n 's/^\(CHRONOLOG_CFG_[A-Z0-9_]*\)=.*/\1/p'); do
    name=$(printf '%s' "${var#CHRONOLOG_CFG_}" | tr 'A-Z_' 'a-z.')
    eval "value=\${$var}"
    set -- "$@" --override "$name=$value"
done

exec python -m broker "$@"
