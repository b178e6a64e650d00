#!/usr/bin/env bash
# Start the machine's PostgreSQL and give the tests a role and a database (idempotent).
# Needs root (it acts as the postgres OS user). Installs the server only when it is missing.
set -euo pipefail
if ! command -v pg_ctlcluster >/dev/null 2>&1; then
  apt-get update -qq >/dev/null && apt-get install -y -qq postgresql >/dev/null
fi
service postgresql start >/dev/null
for _ in $(seq 1 50); do
  su postgres -c "pg_isready -q -h localhost" && break
  sleep 0.2
done
su postgres -c "psql -qtAc \"SELECT 1 FROM pg_roles WHERE rolname = 'execsys'\"" | grep -q 1 ||
  su postgres -c "psql -qc \"CREATE ROLE execsys LOGIN CREATEDB PASSWORD 'execsys'\""
su postgres -c "psql -qtAc \"SELECT 1 FROM pg_database WHERE datname = 'execsys_test'\"" | grep -q 1 ||
  su postgres -c "createdb -O execsys execsys_test"
