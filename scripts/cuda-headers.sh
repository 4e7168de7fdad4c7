#!/usr/bin/env bash
# Installs Debian's CUDA 11.8 headers (nvidia-cuda-dev, in the non-free
# component) so that the `cuda` build tag can be compiled and vetted. Nothing
# here needs a GPU; reuses an existing install.
set -euo pipefail
. "$(dirname "$0")/dpkg-installed.sh"
if dpkg_installed nvidia-cuda-dev; then exit 0; fi
export DEBIAN_FRONTEND=noninteractive
src=/etc/apt/sources.list.d/debian.sources
if [ -f "$src" ] && ! grep -q 'non-free' "$src"; then
  sed -i 's/^Components: main$/Components: main contrib non-free/' "$src"
elif [ -f /etc/apt/sources.list ] && ! grep -q 'non-free' /etc/apt/sources.list; then
  sed -i 's/ main$/ main contrib non-free/' /etc/apt/sources.list
fi
apt-get update -qq
apt-get install -y -qq --no-install-recommends nvidia-cuda-dev
