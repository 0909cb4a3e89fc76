#!/usr/bin/env bash
# Installs, on a fresh Debian machine, what building, testing and the demo
# need. Safe to run again: it does nothing when everything is there.
set -euo pipefail

# libjpeg62-turbo-dev: jpeglib.h, for the region decoder (libjpeg.so.62 at run time).
packages=(fuse3 python3-numpy libjpeg62-turbo libjpeg62-turbo-dev)
if [[ "${TSOCK_SETUP_TORCH:-0}" == 1 ]]; then
	packages+=(python3-torch python3-torchvision python3-pil)
fi

missing=()
for p in "${packages[@]}"; do
	dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
	echo "setup: installing ${missing[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v go >/dev/null; then
	if [[ -x /usr/local/go/bin/go ]]; then
		echo "setup: add /usr/local/go/bin to PATH" >&2
	else
		echo "setup: Go is not installed (expected at /usr/local/go)" >&2
		exit 1
	fi
fi
if [[ ! -e /dev/fuse ]]; then
	modprobe fuse 2>/dev/null || echo "setup: WARNING: no /dev/fuse: mounting will fail" >&2
fi
