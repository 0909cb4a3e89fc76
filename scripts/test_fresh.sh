#!/usr/bin/env bash
# scripts/test.sh as a fresh Debian machine runs it, timed: a bare
# bookworm (debootstrap minbase, plus git and CA certificates) with Go at
# /usr/local/go and nothing else (no apt packages of tsock's, no Go build
# or module cache, no tools), a clean clone of HEAD, and `CI=true .ci/run`
# as root in a chroot with /proc, /sys and /dev bound. Prints test.sh's
# phase times and the whole run's seconds. Needs root and the network
# (Debian's mirror, the Go module proxy). The chroot is removed at the
# end, its mounts first.
#
#   scripts/test_fresh.sh [DIR]      DIR: where to build it (default a new one under /tmp)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
root=${1:-$(mktemp -d /tmp/tsock-fresh.XXXXXX)}
# The chroot's / as a machine's: users other than root (_apt, munge)
# must be able to enter it (mktemp made it 0700).
chmod 0755 "$root"
command -v debootstrap >/dev/null || apt-get install -y -qq debootstrap >/dev/null
cleanup() {
	# Every mount under the chroot, deepest first, before anything is removed.
	grep -F " $root/" /proc/mounts | cut -d' ' -f2 | sort -r | while read -r m; do umount -l "$m" || true; done
	if grep -qF " $root/" /proc/mounts; then
		echo "test_fresh: mounts left under $root; not removing it" >&2
		return
	fi
	rm -rf "$root"
}
trap cleanup EXIT
debootstrap --variant=minbase --include=ca-certificates,git bookworm "$root" http://deb.debian.org/debian >"$root.debootstrap.log" 2>&1 ||
	{ cat "$root.debootstrap.log" >&2; exit 1; }
rm -f "$root.debootstrap.log"
cp -a /usr/local/go "$root/usr/local/go"
cp /etc/resolv.conf /etc/hosts "$root/etc/"
if [[ -d /etc/apt/sources.list.d ]] && ls /etc/apt/sources.list.d/*.sources >/dev/null 2>&1; then
	cp /etc/apt/sources.list.d/*.sources "$root/etc/apt/sources.list.d/"
	rm -f "$root/etc/apt/sources.list"
fi
# This machine's certificate authorities (a proxy's, where there is one).
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
cp /usr/local/share/ca-certificates/* "$root/usr/local/share/ca-certificates/" 2>/dev/null || true
git clone -q "$repo" "$root/root/tsock"
head=$(git -C "$root/root/tsock" rev-parse --short HEAD)
for m in proc sys dev; do
	mount --rbind "/$m" "$root/$m"
	mount --make-rslave "$root/$m"
done
start=$SECONDS
set +e
env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin CI=true \
	chroot "$root" /bin/bash -c 'cd /root/tsock && .ci/run'
rc=$?
set -e
echo "test_fresh: exit $rc after $((SECONDS - start)) s on a fresh machine (HEAD $head)"
exit "$rc"
