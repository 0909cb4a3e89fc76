#!/usr/bin/env bash
# Fuzzes every parser: each Go fuzz target in turn, TSOCK_FUZZTIME a
# target (default 60s), beyond its corpus. scripts/test.sh replays every
# corpus (go test runs a fuzz target's seeds and testdata/fuzz as a
# test) but does not fuzz: the fuzzers' instrumented builds alone cost a
# fresh 2-core machine about 160 s, and a few seconds of fuzzing a run
# found nothing the corpora hold. Run it after changing a parser, and as
# a nightly job. A finding is a failing input written to testdata/fuzz
# (commit it: go test replays it from then on); go's own "context
# deadline exceeded" when the time runs out mid-minimization is not one.
#
#   scripts/fuzz.sh                     every target, 60 s each
#   TSOCK_FUZZTIME=10m scripts/fuzz.sh producer/source:FuzzShardIndex
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g} -Wno-deprecated-declarations"

# package:target, every parser's.
targets=(batchstore:FuzzSetBatchSize batchstore:FuzzParseSubset producer/skipbudget:FuzzParse batchstore/batchfile:FuzzParse producer/source/internal/wds:FuzzIndex producer/source/internal/wds:FuzzExpand producer/source:FuzzS3Keys producer/source:FuzzShardIndex producer/source:FuzzHubClassNames producer/source:FuzzParseColumns producer/source:FuzzParquetFile producer/source/internal/pqfile:FuzzFooter producer/source/internal/pqfile:FuzzChunk producer/source/remote:FuzzSharedConfig producer/source/remote:FuzzRedact producer/source/remote:FuzzContentRange producer/pipeline:FuzzDecode cmd/tsock:FuzzMountFlags cmd/tsock:FuzzStatusView)
if (($#)); then
	targets=("$@")
fi
# Every Fuzz function in the tree must be listed: a parser added later
# is fuzzed too, or this fails.
if (($# == 0)); then
	while IFS=: read -r file name; do
		want="$(dirname "${file#./}"):${name#func }"
		if ! printf '%s\n' "${targets[@]}" | grep -qxF "$want"; then
			echo "fuzz.sh: $want is not in the list of targets" >&2
			exit 1
		fi
	done < <(grep -roE '^func Fuzz\w+' --include='*_test.go' .)
fi

failed=0
for target in "${targets[@]}"; do
	log=$(mktemp /tmp/tsock-fuzz.XXXXXX)
	start=$SECONDS
	# At most 10 s to minimize what it finds: the minimizer stalls on
	# inputs of kilobytes.
	go test -run '^$' -fuzz "^${target#*:}\$" -fuzztime "${TSOCK_FUZZTIME:-60s}" -fuzzminimizetime 10s "./${target%%:*}" >"$log" 2>&1 || true
	if grep -q -E 'Failing input written to|panic:' "$log" || ! grep -q -E 'fuzz: elapsed' "$log"; then
		echo "FAIL $target ($((SECONDS - start)) s):"
		grep -A5 -E 'Failing input|panic:|FAIL' "$log" || cat "$log"
		failed=1
	else
		echo "ok   $target ($((SECONDS - start)) s): $(grep -E 'fuzz: elapsed' "$log" | tail -1)"
	fi
	rm -f "$log"
done
exit "$failed"
