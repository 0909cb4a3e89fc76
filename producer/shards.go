package producer

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/tsock/tsock/producer/wds"
)

// Shards is a dataset of WebDataset tar shards on a local disk: a
// sample's index is its position in shard order, then member order.
// Each shard is indexed once at open (a pass over its headers); a sample
// is then read alone, by a ranged read of its image member.
type Shards struct {
	spec    string
	paths   []string
	samples []shardSample
	keys    []byte   // every sample's key, one after the other
	keyEnds []uint32 // sample i's key is keys[keyEnds[i-1]:keyEnds[i]]
	classes []string
	skipped []string // "shard: key: why", what the index left out
}

// maxKeyBytes bounds a key as kept for messages: a PAX header may name a
// member with a megabyte, and the keys' offsets are 32-bit.
const maxKeyBytes = 255

// shardSample is what a sample costs in memory, besides its key.
type shardSample struct {
	offset int64
	size   int32
	shard  int32
	label  int32
}

// IsShardSpec says whether a --source value names tar shards: a path,
// glob or brace pattern ending in .tar.
func IsShardSpec(spec string) bool { return strings.HasSuffix(spec, ".tar") }

// OpenShards expands spec (braces, then globs: see wds.Expand) and
// indexes every shard, one per core at a time. A missing shard, a
// pattern that matches nothing, or no sample at all fails; a shard that
// breaks off keeps the samples before the break, and the rest is
// counted as skipped.
func OpenShards(spec string) (*Shards, error) {
	paths, err := shardPaths(spec)
	if err != nil {
		return nil, fmt.Errorf("source %s: %w", strconv.Quote(spec), err)
	}
	indexes := make([]shardIndex, len(paths))
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(runtime.NumCPU(), len(paths)) {
		wg.Go(func() {
			for i := range next {
				indexes[i] = indexShard(paths[i])
			}
		})
	}
	for i := range paths {
		next <- i
	}
	close(next)
	wg.Wait()
	s := &Shards{spec: spec, paths: paths}
	for i, ix := range indexes {
		if ix.err != nil {
			return nil, fmt.Errorf("source %s: %w", strconv.Quote(spec), ix.err)
		}
		s.add(int32(i), ix)
	}
	if len(s.samples) == 0 {
		return nil, fmt.Errorf("source %s: no samples in %d shards (%d groups left out; a sample is KEY.jpg (or another image) with KEY.cls or KEY.json)",
			strconv.Quote(spec), len(s.paths), len(s.skipped))
	}
	maxLabel := 0
	for _, smp := range s.samples {
		maxLabel = max(maxLabel, int(smp.label))
	}
	s.classes = make([]string, maxLabel+1)
	for i := range s.classes {
		s.classes[i] = strconv.Itoa(i)
	}
	return s, nil
}

// shardPaths expands spec into shard paths, in order: braces first, then
// each name's glob matches, sorted.
func shardPaths(spec string) ([]string, error) {
	names, err := wds.Expand(spec)
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, name := range names {
		matches := []string{name}
		if strings.ContainsAny(name, "*?[") {
			if matches, err = filepath.Glob(name); err != nil || len(matches) == 0 {
				return nil, fmt.Errorf("no shard matches %s", strconv.Quote(name))
			}
			sort.Strings(matches)
		}
		if len(paths)+len(matches) > wds.MaxShards {
			return nil, fmt.Errorf("more than %d shards", wds.MaxShards)
		}
		paths = append(paths, matches...)
	}
	return paths, nil
}

// shardIndex is one shard's index: its samples, what it left out, and
// why it could not be read at all (err).
type shardIndex struct {
	samples []wds.Sample
	skips   []wds.Skip
	broke   error // where the shard broke off; the samples before stand
	err     error
}

func indexShard(path string) shardIndex {
	f, err := openRegular(path)
	if err != nil {
		return shardIndex{err: err}
	}
	defer f.Close()
	samples, skips, broke := wds.Index(f)
	return shardIndex{samples: samples, skips: skips, broke: broke}
}

// add appends shard's index.
func (s *Shards) add(shard int32, ix shardIndex) {
	path := s.paths[shard]
	for _, smp := range ix.samples {
		if smp.Size > maxFileSize {
			s.skipped = append(s.skipped, fmt.Sprintf("%s: %s: image of %d bytes is over the %d-byte limit", path, smp.Key, smp.Size, maxFileSize))
			continue
		}
		s.samples = append(s.samples, shardSample{offset: smp.Offset, size: int32(smp.Size), shard: shard, label: int32(smp.Label)})
		s.keys = append(s.keys, smp.Key[:min(len(smp.Key), maxKeyBytes)]...)
		s.keyEnds = append(s.keyEnds, uint32(len(s.keys)))
	}
	for _, sk := range ix.skips {
		s.skipped = append(s.skipped, fmt.Sprintf("%s: %s: %s", path, sk.Key, sk.Why))
	}
	if ix.broke != nil {
		s.skipped = append(s.skipped, fmt.Sprintf("%s: the rest of the shard: %v", path, ix.broke))
	}
}

// openRegular opens a shard, refusing anything but a regular file (the
// daemon runs as root: a FIFO would block, a device could act).
func openRegular(path string) (*os.File, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("shard %s: not a regular file", strconv.Quote(path))
	}
	return os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
}

// Describe implements Source.
func (s *Shards) Describe() string {
	return fmt.Sprintf("%s (%d tar shards)", s.spec, len(s.paths))
}

// Len implements Source.
func (s *Shards) Len() int { return len(s.samples) }

// Classes implements Source: the labels' numbers, 0 to the largest.
func (s *Shards) Classes() []string { return s.classes }

// Label implements Source.
func (s *Shards) Label(i int) int { return int(s.samples[i].label) }

// Name implements Source.
func (s *Shards) Name(i int) string {
	from := uint32(0)
	if i > 0 {
		from = s.keyEnds[i-1]
	}
	return s.paths[s.samples[i].shard] + ":" + string(s.keys[from:s.keyEnds[i]])
}

// Skipped lists what indexing left out, "shard: key: why".
func (s *Shards) Skipped() []string { return s.skipped }

// Load implements Source.
func (s *Shards) Load(i int, dst *RGB, scratch *[]byte) error {
	data, err := s.Encoded(i, scratch)
	if err != nil {
		return err
	}
	return decodeImage(data, dst)
}

// Encoded implements EncodedSource: a ranged read of the image member.
func (s *Shards) Encoded(i int, scratch *[]byte) ([]byte, error) {
	smp := s.samples[i]
	f, err := openRegular(s.paths[smp.shard])
	if err != nil {
		return nil, err
	}
	defer f.Close()
	n := int(smp.size)
	if cap(*scratch) < n {
		*scratch = make([]byte, n)
	}
	b := (*scratch)[:n]
	if _, err := f.ReadAt(b, smp.offset); err != nil {
		return nil, fmt.Errorf("read %d bytes at %d: %w", n, smp.offset, err)
	}
	return b, nil
}
