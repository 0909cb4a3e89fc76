package source

import (
	"context"
	"fmt"
	"strconv"
)

// shardFormat is one kind of shard file, tar or Parquet: the rules that
// are the format's own, so that Shards (the pieces, the window, the
// reader, the shard memory and disk) never asks which format it reads.
// A tar's sample is a byte range of its file, read whole or alone by a
// ranged read of its own bytes; a Parquet row is no byte range (a page is
// the least that decodes), so a row group is read and decoded once an
// epoch if any row of it is wanted, and a row read alone reads its page.
type shardFormat interface {
	// noun names the files, plural ("tar shards"); unit, one ("shard").
	noun() string
	unit() string
	// index indexes one file of files (the index pass).
	index(ctx context.Context, files shardFiles, name string) shardIndex
	// opened takes every file's index once all are made (or read from the
	// index file); what it returns is said at mount and in status (""
	// where nothing is worth saying).
	opened(paths []string, indexes []shardIndex) (string, error)
	// classes names the labels 0 to maxLabel, and says why where it could
	// not name them as the files do.
	classes(paths []string, maxLabel int) (names []string, note string)
	// cut makes s's pieces (s.samples are in file order), in parts of at
	// least target bytes where the format can cut a file (0: whole).
	cut(s *Shards, target int64)
	// wantsWhole says whether a piece of samples, of which an epoch wants
	// left, is read whole.
	wantsWhole(left, samples int32) bool
	// readPiece reads piece pc into buf (pc.size bytes of room): what a
	// held piece keeps, and where each row ends in it (nil for a tar).
	readPiece(ctx context.Context, s *Shards, pc piece, buf []byte) (rows []int64, err error)
	// member is sample i's image in its held piece w.
	member(s *Shards, i int, w *wholeShard) ([]byte, error)
	// alone reads sample i by itself, its piece not held.
	alone(ctx context.Context, s *Shards, i int, scratch *[]byte) ([]byte, error)
}

// formatOf is the format a shard spec names: Parquet for .parquet, tar
// otherwise (IsShardSpec has checked it is one of the two).
func formatOf(pattern string, cols Columns) shardFormat {
	if IsParquetSpec(pattern) {
		return &parquetFormat{cols: cols}
	}
	return tarFormat{}
}

// labelNumbers names labels 0 to maxLabel by their numbers.
func labelNumbers(maxLabel int) []string {
	c := make([]string, maxLabel+1)
	for i := range c {
		c[i] = strconv.Itoa(i)
	}
	return c
}

// tarFormat is WebDataset tar shards: a sample is its image member's
// bytes; a piece a byte range of a shard, cut between members.
type tarFormat struct{}

func (tarFormat) noun() string { return "tar shards" }
func (tarFormat) unit() string { return "shard" }

func (tarFormat) index(ctx context.Context, files shardFiles, name string) shardIndex {
	return files.index(ctx, name)
}

func (tarFormat) opened([]string, []shardIndex) (string, error) { return "", nil }

func (tarFormat) classes(_ []string, maxLabel int) ([]string, string) {
	return labelNumbers(maxLabel), ""
}

// cut cuts each shard whole where it is at most target bytes (or target
// is 0), else in parts (cutShard).
func (tarFormat) cut(s *Shards, target int64) {
	for i := 0; i < len(s.samples); {
		sh := s.samples[i].shard
		end := i
		for end < len(s.samples) && s.samples[end].shard == sh {
			end++
		}
		s.cutShard(sh, i, end, target)
		i = end
	}
}

// wantsWhole: where a good part is wanted (a sample alone is a ranged
// read of its own bytes).
func (tarFormat) wantsWhole(left, samples int32) bool {
	return int64(left)*wholeFraction >= int64(samples)
}

func (tarFormat) readPiece(ctx context.Context, s *Shards, pc piece, buf []byte) ([]int64, error) {
	return nil, s.files.readAt(ctx, s.paths[pc.shard], s.versions[pc.shard], buf, pc.off)
}

func (tarFormat) member(s *Shards, i int, w *wholeShard) ([]byte, error) {
	smp := s.samples[i]
	n, at := int64(smp.size), smp.offset-s.pieces[smp.piece].off
	if at < 0 || at+n > int64(len(w.data)) {
		return nil, fmt.Errorf("sample %d: member at %d+%d past its piece's %d bytes: %w", i, at, n, len(w.data), ErrShardChanged)
	}
	return w.data[at : at+n], nil
}

// alone is a ranged read of the image member.
func (tarFormat) alone(ctx context.Context, s *Shards, i int, scratch *[]byte) ([]byte, error) {
	smp := s.samples[i]
	n := int(smp.size)
	if cap(*scratch) < n {
		*scratch = make([]byte, n)
	}
	b := (*scratch)[:n]
	if err := s.files.readAt(ctx, s.paths[smp.shard], s.versions[smp.shard], b, smp.offset); err != nil {
		return nil, err
	}
	s.aloneRead(int64(n))
	s.verified(smp.shard)
	return b, nil
}

// parquetFormat is Parquet files as the Hub publishes them: a sample is
// a row; a piece a row group's image column chunk, decoded when held.
type parquetFormat struct {
	cols Columns
	// files holds each file's footer, walked (parquet.go); nil for a file
	// left out whole.
	files []*parquetShard
}

func (*parquetFormat) noun() string { return "Parquet files" }
func (*parquetFormat) unit() string { return "file" }

func (f *parquetFormat) index(ctx context.Context, files shardFiles, name string) shardIndex {
	return indexParquet(ctx, files, name, f.cols)
}

// opened walks the footers (as indexing did, or from the index file) and
// checks the files agree on a label column.
func (f *parquetFormat) opened(paths []string, indexes []shardIndex) (string, error) {
	var err error
	if f.files, err = openFooters(paths, indexes, f.cols); err != nil {
		return "", err
	}
	return parquetLabels(paths, f.files, f.cols)
}

func (f *parquetFormat) classes(paths []string, maxLabel int) ([]string, string) {
	return parquetClasses(paths, f.files, f.cols, maxLabel)
}

func (f *parquetFormat) cut(s *Shards, _ int64) { f.cutGroups(s) }

// wantsWhole: where any row is (a row alone decodes a page at least: the
// group is read and decoded once an epoch, however sparse the rows it
// wants).
func (*parquetFormat) wantsWhole(left, _ int32) bool { return left > 0 }

func (f *parquetFormat) readPiece(ctx context.Context, s *Shards, pc piece, buf []byte) ([]int64, error) {
	return f.readGroup(ctx, s, pc, buf)
}

func (f *parquetFormat) member(s *Shards, i int, w *wholeShard) ([]byte, error) {
	if w.bad != nil {
		return nil, fmt.Errorf("%s: its row group: %w", s.Name(i), w.bad)
	}
	b, err := rowImage(w.data, w.rows, f.rowInGroup(s, i))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Name(i), err)
	}
	return b, nil
}

func (f *parquetFormat) alone(ctx context.Context, s *Shards, i int, scratch *[]byte) ([]byte, error) {
	return f.readAlone(ctx, s, i, scratch)
}
