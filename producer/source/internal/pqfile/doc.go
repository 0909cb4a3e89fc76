// Package pqfile reads the part of Parquet that tsock serves: a file's
// footer (its schema, row groups and key-value metadata) and the pages
// of a flat column chunk (a byte-array image column, an integer label
// column), decoded into values.
//
// It exists because a Parquet file is input from anyone: parquet-go
// sizes what it allocates by what a file says (a footer's sizes, a
// codec's output, a run of levels) and keeps every footer parsed whole.
// Here every size a file states is checked against a bound the caller
// gives (the row group's rows, the room it may decode into) or against
// the bytes that hold it before anything is allocated; a page is
// decompressed into exactly the bytes its header says, by its own
// chunk's codec, and a decoder that would write past them is an error.
// A footer is walked, not parsed into structures: what is kept of it is
// what the caller asks for (the chunks of the columns it reads).
//
// Invariants: no input panics or allocates more than a small multiple
// of its own bytes or the caller's bound; every error names where in
// the file (a row group, a page's byte in its chunk) and what was wrong.
//
// Across its border: bytes in (a footer, a chunk), values out through a
// callback. No I/O, no goroutine, no state between calls beyond a pool
// of zstd decoders.
package pqfile
