package source

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync"

	"github.com/tsock/tsock/producer/source/internal/wds"
)

// The index pass: every shard read to its end, as many at once as its
// store allows, whole or an error (shardIndex), and what a shard cut
// short by its own bytes lost, counted.

// indexAll indexes every shard as its format does, as many at a time as files allows,
// telling opts.Progress how far it got.
func indexAll(ctx context.Context, paths []string, files shardFiles, format shardFormat, opts Options) []shardIndex {
	indexes := make([]shardIndex, len(paths))
	var mu sync.Mutex
	done := 0
	opts.tell("indexing %d shards: 0 done", len(paths))
	inParallel(len(paths), files.parallel(), func(i int) {
		indexes[i] = format.index(ctx, files, paths[i])
		mu.Lock()
		defer mu.Unlock()
		done++
		opts.tell("indexing %d shards: %d done (reading each whole; kept in the index file for the next mount)", len(paths), done)
	})
	return indexes
}

// inParallel calls fn(0) to fn(n-1), at most parallel at a time, and
// waits for them.
func inParallel(n, parallel int, fn func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(parallel, n) {
		wg.Go(func() {
			for i := range next {
				fn(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// anyFailed says whether a shard could not be indexed at all.
func anyFailed(indexes []shardIndex) bool {
	for _, ix := range indexes {
		if ix.err != nil {
			return true
		}
	}
	return false
}

// wholeIndex is ix if it is whole, or cut short by the shard's own
// bytes; an error naming the shard where its stream broke.
func wholeIndex(name string, ix shardIndex) shardIndex {
	if ix.broke != nil && !wds.ShardsOwn(ix.broke, ix.size) {
		return shardIndex{err: fmt.Errorf("shard %s: indexing broke off at byte %d of %d: %w", strconv.Quote(name), breakAt(ix.broke), ix.size, ix.broke)}
	}
	return ix
}

// breakAt is where a break of wds.Index happened.
func breakAt(err error) int64 {
	var b *wds.Break
	if errors.As(err, &b) {
		return b.At
	}
	return 0
}

// ctxFile reads and seeks a file until ctx ends: an index pass over a
// large local dataset stops with the run (SIGTERM), not at its end.
type ctxFile struct {
	ctx context.Context
	f   *os.File
}

func (c ctxFile) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.f.Read(p)
}

func (c ctxFile) Seek(off int64, whence int) (int64, error) { return c.f.Seek(off, whence) }

// typicalShard is how many groups (samples and skips) a shard that did
// not break holds, the median: what a broken shard is taken to have
// held, to count its lost tail against --max-skipped. 0 where every
// shard broke.
func typicalShard(indexes []shardIndex) int {
	var counts []int
	for _, ix := range indexes {
		if ix.err == nil && ix.broke == nil {
			counts = append(counts, len(ix.samples)+int(skipped(ix.skips)))
		}
	}
	if len(counts) == 0 {
		return 0
	}
	sort.Ints(counts)
	return counts[len(counts)/2]
}
