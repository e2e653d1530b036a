#!/usr/bin/env bash
# Installs the system packages the tests need: valgrind (the memcheck run), Redis 7
# (redis-server, redis-tools: the distributed index's local clusters), python3 (the test
# script finds the memcheck run's test binaries with it) and wamerican (the dictionary
# /usr/share/dict/words that the `words` key set reads). Idempotent:
# does nothing when they are already present. Needs root (or sudo) only when it installs.
set -euo pipefail

need=()
command -v python3 >/dev/null 2>&1 || need+=(python3)
command -v valgrind >/dev/null 2>&1 || need+=(valgrind)
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || need+=(redis-tools)
[ -f /usr/share/dict/words ] || need+=(wamerican)

if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${need[*]}" >&2
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "install-deps: need root or sudo to install ${need[*]}" >&2; exit 1; }
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq "${need[@]}" >/dev/null
