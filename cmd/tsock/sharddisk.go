package main

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/pflag"

	"github.com/tsock/tsock/producer/source"
)

// diskFlags are --shard-disk and --shard-disk-dir: the local disk that
// holds pieces of shards (tar or Parquet) below the shard memory, so that a training
// epoch over shards written class after class mixes like a uniform
// shuffle (source.Arrange).
type diskFlags struct {
	auto bool
	size int64
	dir  string
}

// defaultShardDiskDir is a disk on a Debian machine, where /tmp may be a
// tmpfs (memory).
const defaultShardDiskDir = "/var/tmp"

func (d *diskFlags) add(f *pflag.FlagSet) {
	newAutoSize(f, &d.auto, &d.size, "shard-disk", "local disk for pieces of shards (tar or Parquet) beyond --shard-memory, so that a training epoch mixes like a uniform shuffle where shards hold few classes each: auto (what mixing needs, at most half the free space of --shard-disk-dir; none where the shards mix in memory), a size, or 0")
	f.StringVar(&d.dir, "shard-disk-dir", defaultShardDiskDir, "directory on a local disk for --shard-disk (unnamed files, gone with the mount)")
}

// space is what Arrange is given.
func (d *diskFlags) space(memory int64, batch int) source.ShardSpace {
	disk := d.size
	if d.auto {
		disk = source.AutoDisk
	}
	return source.ShardSpace{Memory: memory, Disk: disk, DiskDir: d.dir, Batch: batch}
}

// logArrangement logs how the shards are read and mixed (pieces, the
// shuffle's window, the shard disk), as Open arranged them at
// --batch-size.
func (d *daemon) logArrangement(src source.Source) {
	sh, ok := source.As[source.Sharded](src)
	if !ok {
		return
	}
	st := sh.Stats()
	slog.Info("shards arranged", "pieces", st.Pieces, "window_pieces", st.Window, "shard_disk_bytes", st.Disk,
		"distinct_labels_per_batch", fmt.Sprintf("%.1f", st.Mix.Distinct), "uniform", fmt.Sprintf("%.1f", st.Mix.Uniform), "took", time.Since(d.opened).Round(time.Millisecond))
}
