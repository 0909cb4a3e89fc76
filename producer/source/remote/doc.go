// Package remote is tsock's object-store I/O: S3-compatible servers
// (AWS, MinIO, Ceph RGW, versitygw…) through minio-go, chosen for being
// one module that speaks to any S3-compatible endpoint, with the AWS
// credential chain built in. Everything else in tsock sees a bucket as
// keys to read whole, in ranges, or list.
//
// Invariants:
//   - A request that meets a fault of the store's (a timeout, a reset or
//     refused connection, a 5xx, throttling, a body shorter than asked,
//     credentials refused after they worked) is retried with backoff and
//     full jitter, Retry-After honoured, for Config.RetryFor from its
//     first fault, then fails with ErrUnavailable; a permanent one (no
//     such key, access denied at first, a replaced object) is not
//     retried; no such bucket is ErrBucketGone, the store's state.
//   - A read that breaks off goes on from the byte reached (If-Match its
//     ETag); an attempt is cut by Config.Timeout of silence, or by a body
//     under the rate floor (Config.SlowRate over Config.SlowFor), not by
//     the time a slow body takes (retry.go).
//   - Retries draw on one retry quota per Store (quota.go): once it is
//     spent one request probes the store and every other waits for it,
//     within its own budget; a success refills it and wakes them all.
//   - A ranged read returns only the bytes of its range: a 206 must name
//     the range asked, a 200's body is cut to it (ranges.go).
//   - A run that stops (ctx) ends every wait and is no failure.
//   - No secret reaches an error, a log line or Stats.
//   - A read returns exactly the bytes asked for, or an error.
//
// What crosses its border: in, a Config (endpoint, timeout, --s3-retry-for)
// and bucket/key requests from package source (ReadAt, Stream, Get, Stat,
// List, Walk, Vanished); out, bytes, ObjectInfo (ETag, size), Stats and
// the outage state (Waiting) for status, and errors a caller can tell
// apart: ErrNotFound (a key), ErrChanged (a replaced object),
// ErrUnavailable and ErrBucketGone (the store's state: StoreFault).
package remote
