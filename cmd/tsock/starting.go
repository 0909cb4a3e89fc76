package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/tsock/tsock/fs"
	"github.com/tsock/tsock/producer/source"
)

// opening is what opening the source is doing, for the starting mount's
// one file (MOUNTPOINT/starting): listing a folder of a million files or indexing a bucket of
// shards takes minutes, and a user who looks at the mountpoint then
// sees how far it got instead of an empty directory.
type opening struct {
	mu      sync.Mutex
	line    string
	started time.Time
}

func (o *opening) set(line string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.line = line
}

func (o *opening) status(spec string) ([]byte, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "state: starting (status.json and consumers/ come once the source is open)\n")
	fmt.Fprintf(&b, "source: %s\n", printable(spec))
	fmt.Fprintf(&b, "opening for %s: %s\n", time.Since(o.started).Round(time.Second), printable(o.line))
	return []byte(b.String()), nil
}

// openSource opens the source while a starting mount at the mountpoint
// says how far it got (MOUNTPOINT/starting), then takes that mount away
// for the real one. SIGINT/SIGTERM end it at any point (ctx).
func (d *daemon) openSource(ctx context.Context) (source.Source, error) {
	o := &opening{started: time.Now(), line: "starting"}
	starting, err := fs.MountStarting(d.mountpoint, func() ([]byte, error) { return o.status(d.source) }, d.allowOther)
	if err != nil {
		return nil, err
	}
	space := d.shardDisk.space(d.shardMemory, d.cfg.BatchSize)
	d.opened = time.Now()
	src, err := source.Open(ctx, d.source, source.Options{
		S3: d.s3, ShardIndex: d.shardIndex, Shards: &space, Columns: d.columns,
		Cache:    source.CacheConfig{Size: d.cacheSize, Dir: d.cacheDir},
		Progress: o.set,
	})
	if uerr := starting.Unmount(); uerr != nil {
		slog.Warn("the starting mount did not go away", "err", uerr)
		if err == nil {
			err = uerr
		}
	}
	return src, err
}
