# Shared by demo.sh, bench.sh and the examples: a work folder, a tsock
# daemon in the background, and a cleanup that never leaves a mount behind.
# Source it after `cd` to the repository; it sets $work, $mnt and $tsock.
export PATH="$PATH:/usr/local/go/bin"
# go-nvml's cgo code calls deprecated NVML functions: silence gcc about it.
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g} -Wno-deprecated-declarations"
# The interpreter of scripts/setup.sh's venv: Debian's numpy and torch,
# and the tsock client installed.
py=${TSOCK_VENV:-/var/cache/tsock/venv}/bin/python
work=$(mktemp -d "/tmp/tsock-$(basename "$0" .sh).XXXXXX")
mnt="$work/mnt"
# tsock keeps tar shards' index files in the user's cache directory: a
# script's own, gone with $work, so that no run reads another's.
export XDG_CACHE_HOME="$work/cache"
tsock="$work/tsock"
daemon=

cleanup() {
	if [[ -n "$daemon" ]] && kill -0 "$daemon" 2>/dev/null; then
		kill -TERM "$daemon"
		wait "$daemon" || true
	fi
	mountpoint -q "$mnt" 2>/dev/null && umount -l "$mnt"
	rm -rf "$work"
}
trap cleanup EXIT

build_tsock() {
	go build -ldflags "-X main.version=$(git describe --tags --always --dirty 2>/dev/null || echo unknown)" -o "$tsock" ./cmd/tsock
}

# shmem: the machine's shared memory (tmpfs and memfd pages) in bytes:
# batch memory as the kernel counts it.
shmem() { awk '/^Shmem:/ { print $2 * 1024 }' /proc/meminfo; }

# mount_bg ARGS…: mounts $mnt in the background with ARGS after the
# mountpoint, and returns once it is ready (printing the daemon's first line).
mount_bg() {
	mkdir -p "$mnt"
	"$tsock" mount "$mnt" "$@" >"$work/mount.log" 2>&1 &
	daemon=$!
	for _ in $(seq 200); do
		[[ -e "$mnt/status" ]] && { head -1 "$work/mount.log"; return; }
		kill -0 "$daemon" 2>/dev/null || break
		sleep 0.05
	done
	echo "mount did not come up:" >&2
	cat "$work/mount.log" >&2
	exit 1
}

# unmount: SIGTERM to the daemon, which unmounts and exits 0.
unmount() {
	kill -TERM "$daemon"
	wait "$daemon"
	daemon=
}
