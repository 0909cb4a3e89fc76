#!/usr/bin/env bash
# The checks that read the code rather than run it: go vet, staticcheck
# (its deprecations included), gofmt and mypy on the Python client. Run
# before every commit. scripts/test.sh runs go vet and mypy itself; not
# staticcheck, which type-checks every dependency from source (250 s of
# CPU on a fresh 2-core machine, and 60 s to build it: a third of the
# ten minutes test.sh has there). Installs what it needs (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
# go-nvml's cgo code calls deprecated NVML functions: silence gcc about it.
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g} -Wno-deprecated-declarations"
[[ -x /var/cache/tsock/gobin/staticcheck ]] && command -v mypy >/dev/null || TSOCK_SETUP_LINT=1 scripts/setup.sh
status=0
unformatted=$(gofmt -l $(git ls-files '*.go'))
if [[ -n "$unformatted" ]]; then
	echo "lint: not gofmt'ed:" $unformatted >&2
	status=1
fi
go vet ./... || status=1
/var/cache/tsock/gobin/staticcheck ./... || status=1
# The S3 test server is a module of its own: ./... does not reach it.
(cd producer/source/remote/s3test/versitygw && go vet . && /var/cache/tsock/gobin/staticcheck .) || status=1
(cd scripts/python && /usr/bin/python3 -m mypy --cache-dir /var/cache/tsock/mypy tsock) || status=1
if ((status == 0)); then
	echo "lint: clean"
fi
exit "$status"
