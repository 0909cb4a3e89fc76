// Command tsock runs one shared image-preprocessing pipeline and serves
// its batches to every training on the machine as files.
//
//	tsock mount MOUNTPOINT --source DIR [flags]
//	tsock status MOUNTPOINT [--watch] [--json]
//	tsock gendata DIR [flags]
//	tsock version
//
// The command wires the packages along the flow: source → producer (or
// ingest) → batchstore → fs, with gpu in GPU mode. What crosses its
// border: in, flags (parsed once into typed values, mountflags.go and
// values.go; a bad one exits 2) and signals (SIGINT, SIGTERM, SIGHUP
// unmount); out, the mount, status, status.json and metrics (one
// snapshot each, snapshot.go; the metrics through client_golang), the
// log (log/slog), and exit codes (exitError, exitUsage in main.go).
package main
