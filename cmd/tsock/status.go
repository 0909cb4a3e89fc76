package main

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/tsock/tsock/batchstore"
)

// status renders MOUNTPOINT/status from the status document (the one
// status.json is): statusText.
func (d *daemon) status() ([]byte, error) { return []byte(statusText(d.statusDoc(d.snapshot()))), nil }

// producerState is the producer's state: one word for programs
// (MOUNTPOINT/state: producing, full, idle, stopped or failed) and a line
// for people (status).
func producerState(snap batchstore.Snapshot, failure string) (word, line string) {
	if failure == "" {
		failure = snap.Failure
	}
	switch {
	case failure != "":
		return "failed", "failed: " + printable(failure)
	case snap.Finished:
		return "stopped", "stopped"
	case snap.ProducerIdle:
		return "idle", "idle: every consumer has all the samples it needs"
	case snap.ProducerWaiting && snap.LingerBlocked:
		return "full", "buffer full of batches already read but still mapped, waiting for readers to unmap them"
	case snap.ProducerWaiting && len(snap.Consumers) == 0:
		return "full", "buffer full, waiting for a consumer to join"
	case snap.ProducerWaiting:
		return "full", "buffer full, waiting for consumers to read"
	}
	return "producing", "producing"
}

// state renders MOUNTPOINT/state.
func (d *daemon) state() ([]byte, error) {
	failure := ""
	if d.ingest == nil {
		failure = d.producer.Stats().Snapshot().Failure
	}
	word, _ := producerState(d.store.Snapshot(), failure)
	return []byte(word + "\n"), nil
}

// rateMeter samples the store's sample count once a second, for a rate
// over the last ten seconds and one for each second of the last minute.
type rateMeter struct {
	store *batchstore.Store
	// remote, if set, is the bytes read from an object store so far.
	remote  func() int64
	mu      sync.Mutex
	samples []rateSample
	start   time.Time
}

// The rate meter's spans, in its one-second samples.
const (
	recentRate  = 10
	rateHistory = 60
)

type rateSample struct {
	at     time.Time
	n      uint64
	remote int64
}

func newRateMeter(s *batchstore.Store) *rateMeter {
	return &rateMeter{store: s, start: time.Now()}
}

func (m *rateMeter) run(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		m.sample()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (m *rateMeter) sample() {
	n := m.store.Snapshot().SamplesPublished
	var remote int64
	if m.remote != nil {
		remote = m.remote()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.samples = append(m.samples, rateSample{time.Now(), n, remote})
	if len(m.samples) > rateHistory+1 {
		m.samples = m.samples[1:]
	}
}

// remoteRate is bytes/s read from the object store over the last ten
// seconds, now being the bytes read so far.
func (m *rateMeter) remoteRate(now int64) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.samples) == 0 {
		return 0
	}
	first := m.samples[max(0, len(m.samples)-recentRate-1)]
	if el := time.Since(first.at).Seconds(); el > 0 {
		return float64(now-first.remote) / el
	}
	return 0
}

// rates are images/s over the last ten seconds and since the start, now
// being the samples published so far (from the caller's snapshot).
func (m *rateMeter) rates(now uint64) (recent, overall float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if el := time.Since(m.start).Seconds(); el > 0 {
		overall = float64(now) / el
	}
	if len(m.samples) > 0 {
		first := m.samples[max(0, len(m.samples)-recentRate-1)]
		if el := time.Since(first.at).Seconds(); el > 0 {
			recent = float64(now-first.n) / el
		}
	}
	return recent, overall
}

// classes renders MOUNTPOINT/classes: the source's class names, one a
// line, in label order (line k is label k). A name with a control
// character (a newline would split it) is written Go-quoted.
func (d *daemon) classes() ([]byte, error) {
	var b strings.Builder
	for _, name := range d.cfg.Source.Classes() {
		if strings.IndexFunc(name, unicode.IsControl) >= 0 {
			name = strconv.Quote(name)
		}
		b.WriteString(name)
		b.WriteByte('\n')
	}
	return []byte(b.String()), nil
}

// printable escapes what status files print that came from outside (file
// names, error messages): control characters, newlines included, and
// bytes that are not UTF-8 become Go escapes, so that no name can add a
// line or make a reader's UTF-8 decoding fail.
func printable(s string) string {
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}
