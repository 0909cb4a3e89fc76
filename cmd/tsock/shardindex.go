package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/tsock/tsock/producer/source"
)

// noShardIndex is the --shard-index value that keeps no index file.
const noShardIndex = "none"

// resolveShardIndex turns --shard-index into the file the source reads
// and writes ("" for none). Indexing tar shards reads every byte of them
// (a tar's headers lie between its members), so without a file the first
// epoch of every mount reads the dataset twice; by default the index is
// therefore kept per dataset in the user's cache directory, and only a
// node's first mount of a dataset pays for it (a $HOME on a shared file
// system: a cluster's first). The file is trusted only for shards still
// the version it was made from, so a stale one costs an index pass, never
// a wrong sample.
func (c *mountCommand) resolveShardIndex() error {
	switch {
	case c.shardIndex == noShardIndex:
		c.shardIndex, c.noIndex = "", "none kept (--shard-index none)"
	case c.shardIndex == "":
		if source.IsShardSpec(c.source) {
			c.shardIndex = defaultShardIndex(c.source, c.s3.Endpoint)
		}
		if c.shardIndex == "" && source.IsShardSpec(c.source) {
			// Said, not silent: every mount of these shards indexes them.
			c.noIndex = "none kept: no cache directory ($XDG_CACHE_HOME and $HOME unset); give --shard-index FILE"
			slog.Warn("the shards' index is not kept: every mount reads the shards to index them", "why", "no cache directory ($XDG_CACHE_HOME and $HOME unset)", "fix", "--shard-index FILE")
		}
	case !source.IsShardSpec(c.source):
		return fmt.Errorf("--shard-index %s: for tar shards only (a --source ending in .tar)", c.shardIndex)
	default:
		if st, err := os.Stat(filepath.Dir(c.shardIndex)); err != nil || !st.IsDir() {
			return fmt.Errorf("--shard-index %s: its directory does not exist", c.shardIndex)
		}
	}
	return nil
}

// defaultShardIndex is the index file of the shards spec names (at
// endpoint, for s3://) in the user's cache directory: $XDG_CACHE_HOME, else
// ~/.cache, then tsock/shard-index/, named by a hash of the two (a local
// spec made absolute). "" where there is no cache directory ($HOME unset).
func defaultShardIndex(spec, endpoint string) string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	if !source.IsS3Spec(spec) {
		if abs, err := filepath.Abs(spec); err == nil {
			spec = abs
		}
	}
	sum := sha256.Sum256([]byte(spec + "\n" + endpoint))
	return filepath.Join(dir, "tsock", "shard-index", hex.EncodeToString(sum[:8])+".idx")
}
