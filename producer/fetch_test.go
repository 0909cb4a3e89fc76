package producer_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/tsock/tsock/producer/producertest"
	"github.com/tsock/tsock/producer/source"
	"github.com/tsock/tsock/producer/source/remote"
)

// outageAhead is a folder whose first read of each sample meets a store
// that is down (ErrUnavailable: a budget of waiting spent) and whose
// later reads find it back: what reads ahead meet during an outage that
// has passed by the time the workers take their samples.
type outageAhead struct {
	*source.Folder
	mu   sync.Mutex
	seen map[int]bool
}

func (o *outageAhead) Encoded(ctx context.Context, i int, scratch *[]byte) ([]byte, error) {
	o.mu.Lock()
	first := !o.seen[i]
	o.seen[i] = true
	o.mu.Unlock()
	if first {
		return nil, fmt.Errorf("sample %d: %w", i, remote.ErrUnavailable)
	}
	return o.Folder.Encoded(ctx, i, scratch)
}

// TestAReadAheadIsNeverASamplesVerdict: every sample's read ahead fails
// (the store was down then); each is read again when its worker takes
// it, and the run ends in exact epochs, nothing skipped, rather than
// failing on a fault that has passed.
func TestAReadAheadIsNeverASamplesVerdict(t *testing.T) {
	folder := producertest.OpenFolder(t, producertest.Folder(t, 24, 2))
	src := &outageAhead{Folder: folder, seen: map[int]bool{}}
	cfg := producertest.Config(src, 4, 2, 1)
	cfg.Fetch = 8
	got, p, runErr, readErr := run(t, cfg)
	if runErr != nil || readErr != nil {
		t.Fatalf("producer %v, reading %v", runErr, readErr)
	}
	if err := (producertest.Stream{Good: producertest.All(24), Label: src.Label, BatchSize: 4, Epochs: 2}).Check(got); err != nil {
		t.Fatal(err)
	}
	if n := p.Stats().Skipped(); n != 0 {
		t.Fatalf("%d samples skipped", n)
	}
}
