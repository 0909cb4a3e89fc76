package source

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// Copies follow their shards. What holds a sample's bytes beyond one
// read (--keep's made samples, --cache's encoded files, whole shards
// carried from one epoch into the next) serves them only while the shard
// is the version it was indexed from. A shard's version is checked once
// per epoch where a copy would be served (one stat, or one HEAD: a
// shard's worth of requests at most, never one per sample), so a shard
// deleted or replaced after epoch e serves nothing from a copy from epoch
// e+1 on; its samples then fail as they would without the copy.

// shardVersions is the per-epoch memo of shards' versions now.
type shardVersions struct {
	mu  sync.Mutex
	now map[int32]*shardCheck
}

// shardCheck is one shard's check this epoch, made once.
type shardCheck struct {
	once sync.Once
	err  error
}

// versionCheckTimeout bounds one check: a HEAD that hangs must not hold
// a worker.
const versionCheckTimeout = time.Minute

// newEpoch forgets the checks: the next epoch checks again.
func (v *shardVersions) newEpoch() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.now = nil
}

// check is shard sh's check this epoch.
func (v *shardVersions) check(sh int32) *shardCheck {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.now == nil {
		v.now = map[int32]*shardCheck{}
	}
	c := v.now[sh]
	if c == nil {
		c = &shardCheck{}
		v.now[sh] = c
	}
	return c
}

// verified records that a read of shard sh this epoch found it the
// version indexed (every read carries it: If-Match, or the local check):
// no stat or HEAD is spent to learn it again.
func (s *Shards) verified(sh int32) {
	s.checks.check(sh).once.Do(func() {})
}

// checkShard is nil if shard sh is still the version indexed, checked
// once this epoch.
func (s *Shards) checkShard(sh int32) error {
	c := s.checks.check(sh)
	c.once.Do(func() {
		ctx, cancel := context.WithTimeout(s.ctx, versionCheckTimeout)
		defer cancel()
		version, size, err := s.files.version(ctx, s.paths[sh])
		switch {
		case err != nil:
			c.err = fmt.Errorf("shard %s: %w", strconv.Quote(s.paths[sh]), err)
		case version != s.versions[sh] || size != s.sizes[sh]:
			c.err = fmt.Errorf("shard %s: %w", strconv.Quote(s.paths[sh]), ErrShardChanged)
		}
	})
	return c.err
}

func (s *Shards) readsCheckVersion() {}

// Version implements Versioned: the version of sample i's shard as
// indexed, while the shard is still that one (checked once an epoch);
// an error once it changed or went.
func (s *Shards) Version(i int) (string, error) {
	sh := s.samples[i].shard
	if err := s.checkShard(sh); err != nil {
		return "", err
	}
	return s.versions[sh], nil
}
