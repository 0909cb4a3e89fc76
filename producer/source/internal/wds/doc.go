// Package wds reads WebDataset tar shards: it indexes a shard's members
// into samples (one sequential pass over the headers, member data skipped
// by seeking) so that each sample's image can later be read alone, by a
// ranged read of the shard. It parses; it does no I/O of its own beyond
// the reader it is given, so the same index serves local files and
// object stores alike.
//
// The convention (WebDataset's): a member's key is its path up to the
// first "." of its base name, its extension the rest, lower-cased.
// Consecutive members with the same key make one sample. A sample is
// kept when it has an image member (jpg jpeg png webp bmp gif tif tiff
// ppm pgm; the first one wins) and a label: KEY.cls holding a decimal
// integer, else KEY.json holding an object with an integer "label".
// Other members are ignored.
//
// Invariants:
//   - Index never panics and never reads a member's data except a
//     label's (at most MaxLabelBytes): any byte stream gives samples and
//     skips, or an error that says where the stream went wrong, with
//     the samples found before it.
//   - Every sample's image span lies inside the stream as indexed.
//   - Expand never produces more than MaxShards names.
//
// What crosses its border: in, a reader over one shard's bytes (a local
// file or an object store's stream: wds does no I/O of its own) and shard
// patterns to Expand; out, samples (key, image span, label), skips, and a
// Break saying where a stream ended early and whether the shard's own
// bytes say so.
package wds
