// Package remote is tsock's object-store I/O: S3-compatible servers
// (AWS, MinIO, Ceph RGW, versitygw…) through minio-go, chosen for being
// one module that speaks to any S3-compatible endpoint, with the AWS
// credential chain built in. Everything else in tsock sees a bucket as
// keys to read whole, in ranges, or list.
//
// Invariants:
//   - Every request is tried at most Config.Attempts times; a transient
//     fault (a timeout, a reset or refused connection, a 5xx, throttling,
//     a body shorter than asked) is retried after a backoff and counted;
//     a permanent one (no such key or bucket, access denied) is not.
//   - No secret reaches an error, a log line or Stats.
//   - A read returns exactly the bytes asked for, or an error.
package remote
