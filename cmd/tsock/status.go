package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/dustin/go-humanize"

	"github.com/tsock/tsock/batchstore"
	"github.com/tsock/tsock/producer/source"
)

// status renders MOUNTPOINT/status: one "key: value" per line.
func (d *daemon) status() ([]byte, error) { return []byte(d.statusText(d.snapshot())), nil }

// statusText is a snapshot for people.
func (d *daemon) statusText(s *mountSnapshot) string {
	snap := s.store
	var b strings.Builder
	if s.ingest != nil {
		d.ingestStatus(&b, s)
	} else {
		d.producerStatus(&b, s)
	}
	fmt.Fprintf(&b, "produced: %d batches, %d samples\n", snap.Published, snap.SamplesPublished)
	fmt.Fprintf(&b, "produce rate: %.0f samples/s (last 10s), %.0f samples/s (overall)\n", s.rate, s.rateOverall)
	fmt.Fprintf(&b, "producer waited for room: %s\n", snap.ProducerWait.Round(time.Millisecond))
	fmt.Fprintf(&b, "buffer: %s used of %s (%d batches held, %s being written)\n",
		humanize.IBytes(uint64(snap.Used)), humanize.IBytes(uint64(snap.Limit)), snap.Held, humanize.IBytes(uint64(snap.Reserved)))
	// With passthrough a reader's mapping keeps a batch's memory after its
	// close: that memory is part of the buffer too.
	mapped := humanize.IBytes(uint64(snap.Lingering)) + " (part of the buffer)"
	if snap.Lingering < 0 {
		mapped = "unknown (memfd batch storage cannot tell; the private tmpfs, as root, can)"
	}
	fmt.Fprintf(&b, "released but still mapped: %s\n", mapped)
	if !snap.Unwatched.IsZero() {
		bound := "until one joins or the mount stops (--idle-exit bounds this)"
		if d.idleExit > 0 {
			bound = fmt.Sprintf("until one joins, or %s without one (--idle-exit)", d.idleExit)
		}
		fmt.Fprintf(&b, "unwatched: no consumer for %s; %s of batches held for the next to join, %s\n",
			time.Since(snap.Unwatched).Round(time.Second), humanize.IBytes(uint64(snap.Used)), bound)
	}
	fmt.Fprintf(&b, "data path: %s\n", s.dataPath)
	// Batches read are forgotten by the kernel soon after: a number that
	// keeps growing in a long run is memory that is not coming back.
	pruning := "forgotten once released"
	if !s.prunesInodes {
		pruning = "kept until memory pressure: this kernel cannot be asked to forget them (NOTIFY_PRUNE, Linux 6.16+)"
	}
	fmt.Fprintf(&b, "batch inodes held by the kernel: %d (%s)\n", s.batchInodes, pruning)
	if s.gpu != nil {
		s.gpu.status(&b, snap.Consumers)
	}
	if cs := s.cache; cs != nil {
		where := "in memory"
		if cs.Dir != "" {
			where = "on disk in " + printable(cs.Dir)
		}
		fmt.Fprintf(&b, "raw cache: %s of %s %s, %d files; hit rate %.0f%% (%d hits, %d misses)\n",
			humanize.IBytes(uint64(cs.Used)), humanize.IBytes(uint64(cs.Limit)), where, cs.Files, 100*cs.HitRate(), cs.Hits, cs.Misses)
		if cs.Dropped > 0 {
			fmt.Fprintf(&b, "  not kept: %d files (writes to the cache directory failed: a full disk?)\n", cs.Dropped)
		}
	}
	if ps := s.producer; ps != nil {
		fmt.Fprintf(&b, "skipped inputs: %d\n", ps.Skipped)
		if ps.Missing > 0 {
			fmt.Fprintf(&b, "keys missing this epoch: %d (held out of it; skipped once a listing at its end shows the dataset still there, else the run fails)\n", ps.Missing)
		}
		if k := s.kept; k != nil {
			fmt.Fprintf(&b, "kept: %s of %s, %d samples made once and copied into later epochs (%d copies)",
				humanize.IBytes(uint64(k.Used)), humanize.IBytes(uint64(k.Limit)), k.Samples, k.Served)
			if k.Refused > 0 {
				fmt.Fprintf(&b, "; %d makings not kept: the set does not fit in --keep, the rest is decoded every epoch", k.Refused)
			}
			b.WriteString("\n")
		}
		if d.cfg.Rescan {
			fmt.Fprintf(&b, "rescans added: %d samples", ps.Added)
			if ps.LastAdded > 0 {
				fmt.Fprintf(&b, " (last %d, before producer epoch %d, %s ago)", ps.LastAdded, ps.LastAddedEpoch, time.Since(ps.LastAddedAt).Round(time.Second))
			}
			fmt.Fprintf(&b, "; removed: %d samples (their files left the folder: out of the dataset, not skipped)\n", ps.Removed)
		}
		for _, r := range ps.RecentSkips {
			fmt.Fprintf(&b, "  skipped: %s\n", printable(r))
		}
		if r := s.remote; r != nil {
			fmt.Fprintf(&b, "remote: %s; %s/s over the last 10 s\n", r.line, humanize.IBytes(uint64(r.rate)))
		}
		if sh := s.shards; sh != nil {
			b.WriteString(shardsLine(sh))
		}
		if r := d.shuffleReach(s.shards); r != nil {
			b.WriteString(r.line())
		}
		if left := s.leftOut; len(left) > 0 {
			fmt.Fprintf(&b, "left out when the source was listed or indexed: %d (%d samples, counted against --max-skipped)\n", len(left), s.leftOutSamples)
			for _, l := range left[:min(len(left), 3)] {
				fmt.Fprintf(&b, "  left out: %s\n", printable(l))
			}
		}
	}
	if snap.FreeErrors > 0 {
		fmt.Fprintf(&b, "free errors: %d (last: %s)\n", snap.FreeErrors, printable(snap.LastFreeError))
	}
	fmt.Fprintf(&b, "consumers: %d\n", len(snap.Consumers))
	for _, cs := range snap.Consumers {
		fmt.Fprintf(&b, "  %s\n", cs.Line())
	}
	return b.String()
}

// ingestStatus is the head of status with --ingest.
func (d *daemon) ingestStatus(b *strings.Builder, s *mountSnapshot) {
	st := s.ingest
	fmt.Fprintf(b, "source: %s\n", d.ingestDescription())
	epochs := "forever"
	if d.cfg.Epochs > 0 {
		epochs = fmt.Sprint(d.cfg.Epochs)
	}
	fmt.Fprintf(b, "batch size: %d (consumers' default)\n", d.cfg.BatchSize)
	fmt.Fprintf(b, "epoch: %d of %s (%d samples of it published)\n", st.Epoch, epochs, st.Position)
	fmt.Fprintf(b, "state: %s\n", s.stateText)
	last := "never"
	if !st.LastWrite.IsZero() {
		last = time.Since(st.LastWrite).Round(time.Second).String() + " ago"
	}
	fmt.Fprintf(b, "ingest: next %06d, %d refused, %d samples skipped, last write %s; %s\n",
		s.ingestNext, st.Refused, st.Skipped, last, d.mounted.IngestPath())
}

// producerStatus is the head of status with the built-in pipeline.
func (d *daemon) producerStatus(b *strings.Builder, s *mountSnapshot) {
	ps := s.producer
	cfg := d.cfg
	fmt.Fprintf(b, "source: %s\n", printable(cfg.Source.Describe()))
	fmt.Fprintf(b, "samples: %d\n", cfg.Source.Len())
	fmt.Fprintf(b, "classes: %d\n", len(cfg.Source.Classes()))
	fmt.Fprintf(b, "transform: %s, %dx%d %s, batch size %d, seed %d, %d workers\n",
		cfg.Transform, cfg.ImageSize, cfg.ImageSize, cfg.Layout, cfg.BatchSize, cfg.Seed, cfg.Workers)
	fmt.Fprintf(b, "decoder: %s\n", s.decoder)
	epochs := "forever"
	if cfg.Epochs > 0 {
		epochs = fmt.Sprint(cfg.Epochs)
	}
	fmt.Fprintf(b, "epoch: %d of %s (%d of %d samples)\n", ps.Epoch, epochs, ps.EpochDone, ps.EpochLen)
	fmt.Fprintf(b, "state: %s\n", s.stateText)
}

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

// shardsLine is status's line on whole-shard reading: what is held of
// the shard memory, what was read whole, how the next epochs' first
// shards fared (read ahead in vain: a consumer joined and the epoch was
// stitched), and the index file.
func shardsLine(sh *source.ShardStats) string {
	labels := ""
	if sh.Labels != "" {
		labels = "labels: " + printable(sh.Labels) + "\n"
	}
	if sh.Alone != "" {
		return "shards: read a sample at a time: " + sh.Alone + "\n" + labels
	}
	line := fmt.Sprintf("shards: read in %d pieces of %s; %d held (%s of %s shard memory and %s shard disk, %s of it in use), %d being read; %d read (%s); next epochs' first pieces: %d carried, %d read ahead in vain",
		sh.Pieces, humanize.IBytes(uint64(sh.PieceBytes)), sh.Held, humanize.IBytes(uint64(sh.HeldBytes)), humanize.IBytes(uint64(sh.Memory)),
		humanize.IBytes(uint64(sh.Disk)), humanize.IBytes(uint64(sh.DiskMapped)), sh.Reading, sh.Reads,
		humanize.IBytes(uint64(sh.ReadBytes)), sh.Carried, sh.Wasted)
	if sh.Index != "" {
		line += "; index " + printable(sh.Index)
	}
	return line + "\n" + labels
}
