package producer

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"time"

	"github.com/tsock/tsock/producer/source"
	"github.com/tsock/tsock/producer/source/remote"
)

// Stats counts what the producer did; safe for concurrent use.
type Stats struct {
	mu      sync.Mutex
	changed chan struct{}
	// Only the epoch being dispatched is counted: the dispatcher waits for
	// each epoch's last verdict before it begins the next, and a run of
	// --epochs 0 must not keep a count for every epoch it ever made.
	epoch     int // epoch being dispatched
	epochLen  int // samples in its order
	epochDone int // samples of it made or skipped
	bad       map[int]badSample
	// missing: samples whose keys were not found this epoch, in a source
	// whose dataset can vanish (source.Vanisher): out of the epoch, but
	// counted as skipped only once a listing at the epoch's end shows
	// the dataset is still there (settleMissing); a dataset deleted key
	// by key fails the run and counts none of them.
	missing map[int]badSample
	vanish  bool // the source is a Vanisher
	// removed: samples whose files left a rescanned folder (--rescan):
	// out of the dataset, not skipped, not counted against the budget.
	removed map[int]bool
	budget  func(skipped int) error // the skip budget's check
	rescan  bool                    // the source is listed again (--rescan)
	recent  []string                // the last few skip reasons
	decoded uint64
	started time.Time
	failure error
	// what rescans added: in all, and the last time
	addedAll, lastAdded, lastAddedEpoch int
	lastAddedAt                         time.Time
}

// added records that a rescan before epoch appended n samples.
func (s *Stats) added(n, epoch int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addedAll += n
	s.lastAdded, s.lastAddedEpoch, s.lastAddedAt = n, epoch, time.Now()
}

func newStats() *Stats {
	return &Stats{
		changed: make(chan struct{}), bad: map[int]badSample{}, missing: map[int]badSample{}, removed: map[int]bool{}, started: time.Now(),
	}
}

// Snapshot is a copy of the counters.
type StatsSnapshot struct {
	Epoch       int      // producer epoch being made
	EpochLen    int      // samples in it
	EpochDone   int      // samples of it made or skipped
	Decoded     uint64   // samples made, all epochs
	Skipped     int      // distinct samples that failed
	Missing     int      // samples whose keys were missing this epoch, not yet counted (settleMissing)
	Removed     int      // samples whose files left a rescanned folder
	RecentSkips []string // the last few, "path: reason"
	Failure     string   // why the pipeline stopped, if it did
	// Added: samples rescans appended, all told; the last one added
	// LastAdded before epoch LastAddedEpoch, at LastAddedAt.
	Added, LastAdded, LastAddedEpoch int
	LastAddedAt                      time.Time
	Elapsed                          time.Duration
}

// Snapshot returns the counters.
func (s *Stats) Snapshot() StatsSnapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := StatsSnapshot{
		Epoch: s.epoch, EpochLen: s.epochLen, EpochDone: s.epochDone,
		Decoded: s.decoded, Skipped: len(s.bad), Missing: len(s.missing), Removed: len(s.removed), RecentSkips: append([]string(nil), s.recent...),
		Added: s.addedAll, LastAdded: s.lastAdded, LastAddedEpoch: s.lastAddedEpoch, LastAddedAt: s.lastAddedAt,
		Elapsed: time.Since(s.started),
	}
	if s.failure != nil {
		snap.Failure = s.failure.Error()
	}
	return snap
}

// Skipped is the number of distinct samples that failed.
func (s *Stats) Skipped() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.bad)
}

// excluded says whether sample i is left out of epochs: skipped, or
// removed from the source.
func (s *Stats) excluded(i int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, bad := s.bad[i]
	_, missing := s.missing[i]
	return bad || missing || s.removed[i]
}

// setRemoved records the samples a rescan no longer found (and only
// those: one that came back is made again). A sample skipped because
// its file had gone is removed, not skipped: the budget gets it back.
func (s *Stats) setRemoved(removed []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.removed)
	for _, i := range removed {
		s.removed[i] = true
		delete(s.bad, i)
	}
}

func (s *Stats) beginEpoch(epoch, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.epoch, s.epochLen, s.epochDone = epoch, n, 0
}

const recentSkips = 5

// badSample is a skipped sample: why, and its version when it was read
// ("" where the source has none), to try it again once its file changes.
type badSample struct {
	reason, version string
}

// verdict records that sample index (read at version) of the epoch being
// dispatched was made (err nil) or failed; name names it, asked only for
// a skip (a folder builds its path on each call). It returns an error
// wrapping skipbudget.ErrExceeded when this skip is one past the budget.
func (s *Stats) verdict(index int, version string, name func(int) string, err error) (over error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.epochDone++
	switch _, seen := s.bad[index]; {
	case err == nil:
		s.decoded++
	case remote.StoreFault(err): // not the sample's fault: the pipeline stops on it
	case errors.Is(err, context.Canceled): // the run is stopping: its reads were cut short
	case s.rescan && errors.Is(err, fs.ErrNotExist):
		// A file removed from a rescanned folder: it leaves the dataset
		// (the next listing confirms it), it is not data lost.
		s.removed[index] = true
	case s.vanish && errors.Is(err, remote.ErrNotFound):
		// A key missing: the sample's loss, or the first sign of a
		// dataset being deleted key by key; the epoch's end says which.
		s.missing[index] = badSample{reason: fmt.Sprintf("%s: %v", name(index), err), version: version}
	case !seen:
		over = s.skip(index, badSample{reason: fmt.Sprintf("%s: %v", name(index), err), version: version})
	}
	if s.epochDone == s.epochLen {
		close(s.changed)
		s.changed = make(chan struct{})
	}
	return over
}

// skip counts sample index as skipped for b; it returns an error
// wrapping skipbudget.ErrExceeded when this skip is one past the budget.
// The caller holds s.mu.
func (s *Stats) skip(index int, b badSample) (over error) {
	s.bad[index] = b
	s.recent = append(s.recent, b.reason)
	if len(s.recent) > recentSkips {
		s.recent = s.recent[1:]
	}
	if s.budget != nil {
		if over = s.budget(len(s.bad)); over != nil {
			over = fmt.Errorf("%w; the last: %s", over, b.reason)
		}
	}
	return over
}

// settleMissing counts the samples whose keys were missing as skipped,
// the dataset being still there; it returns the budget's error where
// they are over it.
func (s *Stats) settleMissing() (over error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, b := range s.missing {
		if err := s.skip(i, b); err != nil && over == nil {
			over = err
		}
	}
	clear(s.missing)
	return over
}

// anyMissing says whether keys were missing this epoch.
func (s *Stats) anyMissing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.missing) > 0
}

// retryChanged forgets the skips of samples whose version changed since
// they were read (a file copied in half-written, complete now): the next
// epoch tries them again. It returns them.
func (s *Stats) retryChanged(v source.Versioned) []int {
	s.mu.Lock()
	was := make(map[int]string, len(s.bad))
	for i, b := range s.bad {
		if b.version != "" {
			was[i] = b.version
		}
	}
	s.mu.Unlock()
	var retried []int
	for i, version := range was { // a stat each: not under the lock verdicts take
		if now, err := v.Version(i); err == nil && now != version {
			retried = append(retried, i)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, i := range retried {
		delete(s.bad, i)
	}
	return retried
}

// passedOver counts a sample of the epoch being dispatched that no
// consumer wanted: it has its verdict without being made.
func (s *Stats) passedOver() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.epochDone++
	if s.epochDone == s.epochLen {
		close(s.changed)
		s.changed = make(chan struct{})
	}
}

// waitEpoch blocks until every sample of the epoch being dispatched has
// a verdict.
func (s *Stats) waitEpoch(ctx context.Context) error {
	for {
		s.mu.Lock()
		done := s.epochDone == s.epochLen
		ch := s.changed
		s.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (s *Stats) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failure = err
}
