#!/usr/bin/env bash
# Builds an ImageNet-like folder of real photographs: JPEGs of 300-500 px
# cut from the photos of Debian's wallpaper packages (downloaded with
# apt-get download and unpacked with dpkg -x; nothing is installed), at
# mixed qualities, some progressive, grayscale and CMYK. See
# scripts/python/realphotos.py for what the set holds.
#
#   scripts/realphotos.sh OUT [IMAGES] [--detailed]     default 2000 images
#
# --detailed: crops at the photos' own resolution, quality 95-97, 4:4:4:
# the most bits per pixel a photo set has. The packages are kept in
# ${TSOCK_CACHE:-/var/cache/tsock}/wallpapers for the next run.
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $# -ge 1 ]] || { sed -n '2,11s/^# \{0,1\}//p' "$0" >&2; exit 2; }
out=$1
images=${2:-2000}
shift $(($# >= 2 ? 2 : 1))
TSOCK_SETUP_TORCH=1 scripts/setup.sh # python3-pil
cache=${TSOCK_CACHE:-/var/cache/tsock}/wallpapers
mkdir -p "$cache"
packages=(plasma-workspace-wallpapers mate-backgrounds ukui-wallpapers)
got=0
updated=0
# fetch PACKAGE: its .deb into the cache. A machine whose packages came
# preinstalled may have no package lists yet: fetch them once, then retry.
fetch() {
	(cd "$cache" && apt-get download "$1" >/dev/null 2>&1) && return
	((updated == 0)) || return 1
	updated=1
	apt-get update -qq >/dev/null 2>&1 || true
	(cd "$cache" && apt-get download "$1" >/dev/null 2>&1)
}
for p in "${packages[@]}"; do
	if [[ ! -d "$cache/$p" ]]; then
		if ! fetch "$p"; then
			echo "realphotos: could not download $p; going on without it" >&2
			continue
		fi
		dpkg -x "$cache/$p"_*.deb "$cache/$p.tmp" && mv "$cache/$p.tmp" "$cache/$p"
		rm -f "$cache/$p"_*.deb
	fi
	got=$((got + 1))
done
((got > 0)) || { echo "realphotos: no wallpaper package could be downloaded (apt-get download ${packages[*]})" >&2; exit 1; }
rm -rf "${out:?}"/*
/usr/bin/python3 scripts/python/realphotos.py "$out" "$cache" --images "$images" "$@"
