package producer

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Stats counts what the producer did; safe for concurrent use.
type Stats struct {
	mu        sync.Mutex
	changed   chan struct{}
	epochLen  map[int]int
	epochDone map[int]int
	epoch     int // epoch being dispatched
	bad       map[int]string
	recent    []string // the last few skip reasons
	decoded   uint64
	started   time.Time
	failure   error
}

func newStats() *Stats {
	return &Stats{
		changed: make(chan struct{}), epochLen: map[int]int{}, epochDone: map[int]int{},
		bad: map[int]string{}, started: time.Now(),
	}
}

// Snapshot is a copy of the counters.
type StatsSnapshot struct {
	Epoch       int      // producer epoch being made
	EpochLen    int      // samples in it
	EpochDone   int      // samples of it made or skipped
	Decoded     uint64   // samples made, all epochs
	Skipped     int      // distinct samples that failed
	RecentSkips []string // the last few, "path: reason"
	Failure     string   // why the pipeline stopped, if it did
	Elapsed     time.Duration
}

// Snapshot returns the counters.
func (s *Stats) Snapshot() StatsSnapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := StatsSnapshot{
		Epoch: s.epoch, EpochLen: s.epochLen[s.epoch], EpochDone: s.epochDone[s.epoch],
		Decoded: s.decoded, Skipped: len(s.bad), RecentSkips: append([]string(nil), s.recent...),
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

func (s *Stats) isBad(i int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.bad[i]
	return ok
}

func (s *Stats) beginEpoch(epoch, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.epoch = epoch
	s.epochLen[epoch] = n
}

const recentSkips = 5

// verdict records that sample index of epoch was made (err nil) or failed.
func (s *Stats) verdict(epoch, index int, name string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.epochDone[epoch]++
	if err == nil {
		s.decoded++
	} else if _, seen := s.bad[index]; !seen {
		reason := fmt.Sprintf("%s: %v", name, err)
		s.bad[index] = reason
		s.recent = append(s.recent, reason)
		if len(s.recent) > recentSkips {
			s.recent = s.recent[1:]
		}
	}
	if s.epochDone[epoch] == s.epochLen[epoch] {
		close(s.changed)
		s.changed = make(chan struct{})
	}
}

// waitEpoch blocks until every sample of epoch has a verdict.
func (s *Stats) waitEpoch(ctx context.Context, epoch int) error {
	for {
		s.mu.Lock()
		done := s.epochDone[epoch] == s.epochLen[epoch]
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
