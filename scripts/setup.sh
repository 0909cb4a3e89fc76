#!/usr/bin/env bash
# Installs, on a fresh Debian machine, what building, testing and the demo
# need. Safe to run again: it does nothing when everything is there.
set -euo pipefail

# What building needs: gcc (cgo), libjpeg62-turbo-dev (jpeglib.h, for the
# region decoder; libjpeg.so.62 at run time). TSOCK_SETUP_BUILD_ONLY=1
# installs only these (scripts/test.sh compiles the tests while the rest
# installs).
build=(gcc libc6-dev libjpeg62-turbo-dev)
# libjpeg62-turbo-dev: jpeglib.h, for the region decoder (libjpeg.so.62 at run time).
# python3-venv, -pip, -setuptools, -wheel: the Python client's venv (below).
# tmux: the test that looks at `tsock status --watch` in a real terminal.
packages=(fuse3 python3-numpy libjpeg62-turbo libjpeg62-turbo-dev python3-venv python3-pip python3-setuptools python3-wheel tmux)
if [[ "${TSOCK_SETUP_TORCH:-0}" == 1 ]]; then
	packages+=(python3-torch python3-torchvision python3-pil python3-optuna)
fi
# munge, slurm-wlm: the Slurm recipe's test on a real Slurm (scripts/test.sh).
if [[ "${TSOCK_SETUP_SLURM:-0}" == 1 ]]; then
	packages+=(munge slurm-wlm)
fi
# python3-mypy: the Python client's types, checked by scripts/test.sh
# (TSOCK_SETUP_MYPY=1) and scripts/lint.sh (TSOCK_SETUP_LINT=1).
if [[ "${TSOCK_SETUP_MYPY:-0}" == 1 || "${TSOCK_SETUP_LINT:-0}" == 1 ]]; then
	packages+=(python3-mypy)
fi

# Go tools the tests need, pinned, built once from the Go module proxy:
# staticcheck (TSOCK_SETUP_LINT=1: scripts/lint.sh) and a real S3 server for the
# object-store tests (TSOCK_SETUP_S3=1; tests start it on loopback,
# producer/source/remote/s3test). Built in the background while apt-get
# installs (a download and dpkg's disk work, where the build is CPU): a
# fresh machine's setup is the longer of the two, not their sum.
gobuilds=()
gotool() { # gotool NAME MODULE@VERSION [BUILD FLAG...]
	[[ -x /var/cache/tsock/gobin/$1 ]] && return 0
	gobuild "$1" /tmp install "${@:3}" "$2"
}
gobuild() { # gobuild NAME DIR GO-COMMAND ARG...: in the background, logged
	mkdir -p /var/cache/tsock/gobin
	local log=/var/cache/tsock/gobin/.$1.log
	echo "setup: building $1 (log: $log)" >&2
	(cd "$2" && GOBIN=/var/cache/tsock/gobin PATH="$PATH:/usr/local/go/bin" go "${@:3}" >"$log" 2>&1) &
	gobuilds+=("$!:$1")
}
if [[ "${TSOCK_SETUP_LINT:-0}" == 1 ]]; then
	gotool staticcheck honnef.co/go/tools/cmd/staticcheck@v0.8.2
fi
if [[ "${TSOCK_SETUP_S3:-0}" == 1 ]]; then
	# versitygw's gateway and POSIX backend alone (a module of this
	# tree, pinned to versitygw v1.8.0 by its go.sum): versitygw's own
	# command links every backend, 224 s of CPU on a fresh 2-core
	# machine against 159. Unoptimized and unstripped: a server for
	# tests, which serves them as well. Always built: go's cache makes
	# an unchanged one a link, and a changed one is never stale.
	gobuild versitygw-posix "$(cd "$(dirname "$0")/.." && pwd)/producer/source/remote/s3test/versitygw" \
		build -gcflags='all=-N -l' -o /var/cache/tsock/gobin/versitygw-posix .
fi

install() { # install PACKAGE...: those not installed yet
	local missing=() p
	for p in "$@"; do
		dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
	done
	if ((${#missing[@]})); then
		echo "setup: installing ${missing[*]}" >&2
		export DEBIAN_FRONTEND=noninteractive
		[[ -n "${updated:-}" ]] || apt-get update -qq
		updated=1
		apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	fi
}
if [[ "${TSOCK_SETUP_BUILD_ONLY:-0}" == 1 ]]; then
	install "${build[@]}"
	exit 0
fi
install "${build[@]}" "${packages[@]}"

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
# fusermount3, which mounts for a user without root, opens /etc/mtab; a
# Debian booted by systemd has it (a link to the kernel's table), a bare
# one (debootstrap, some container images) does not, and every mount
# without root then fails with "failed to open /etc/mtab".
if [[ ! -e /etc/mtab ]]; then
	ln -s ../proc/self/mounts /etc/mtab
fi

# The Python client, installed as the README says, into a venv that sees
# Debian's numpy and torch (the system interpreter is externally managed):
# the scripts and examples run with its interpreter (scripts/lib.sh: $py).
# Offline: numpy and setuptools come from the system.
venv=${TSOCK_VENV:-/var/cache/tsock/venv}
if [[ ! -x "$venv/bin/python" ]]; then
	mkdir -p "$(dirname "$venv")"
	/usr/bin/python3 -m venv --system-site-packages "$venv"
fi
# From a copy: a build in place leaves build/ and *.egg-info in the checkout.
src=$(mktemp -d)
# -L: tsock/VERSION is a link to cmd/tsock/VERSION, the binary's version.
cp -rL "$(dirname "$0")/python/pyproject.toml" "$(dirname "$0")/python/README.md" "$(dirname "$0")/python/tsock" "$src"
"$venv/bin/pip" install --quiet --no-index --no-build-isolation "$src" >/dev/null
rm -rf "$src"

failed=0
for b in "${gobuilds[@]}"; do
	if ! wait "${b%%:*}"; then
		echo "setup: building ${b#*:} failed:" >&2
		cat "/var/cache/tsock/gobin/.${b#*:}.log" >&2
		failed=1
	fi
done
exit "$failed"
