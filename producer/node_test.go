package producer_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tsock/tsock/batchstore"
	"github.com/tsock/tsock/producer"
	"github.com/tsock/tsock/producer/producertest"
	"github.com/tsock/tsock/producer/skipbudget"
	"github.com/tsock/tsock/producer/source"
)

// On a node of several, a sample skipped for its own bytes fails the
// run at once, naming it, whatever --max-skipped allows: that node's
// ranks would take fewer steps than the other nodes' (DDP hangs). The
// node whose share holds no bad sample serves its half (padded to
// ⌈n/2⌉) exactly.
func TestASkipOnANodeFailsItsRun(t *testing.T) {
	dir := producertest.Folder(t, 24, 3)
	bad := []string{filepath.Join(dir, "class001", "zz-text.jpg")}
	if err := os.WriteFile(bad[0], []byte("this is not an image\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := source.Open(context.Background(), dir, source.Options{})
	if err != nil {
		t.Fatal(err)
	}
	order := producer.NodeOrder(src, producertest.Config(src, 5, 1, 1).Seed)
	badAt := map[int]bool{}
	for i := range src.Len() {
		if slices.Contains(bad, src.Name(i)) {
			badAt[i] = true
		}
	}
	var failed, clean int
	var seen []int
	for k := range 2 {
		cfg := producertest.Config(src, 5, 1, 1)
		cfg.Node = producer.Node{Index: k, Count: 2}
		if cfg.MaxSkipped, err = skipbudget.Parse("100%"); err != nil {
			t.Fatal(err)
		}
		got, _, runErr, readErr := run(t, cfg)
		run := order[k*len(order)/2 : (k+1)*len(order)/2]
		holdsBad := slices.ContainsFunc(run, func(i int) bool { return badAt[i] })
		if !holdsBad {
			clean++
			for _, e := range byEpoch(got) {
				for _, i := range e {
					seen = append(seen, int(i))
				}
			}
			if want := (src.Len() + 1) / 2; runErr != nil || readErr != nil || len(seen) != want { // its run, padded
				t.Fatalf("node %d of 2, no bad sample in its share: producer %v, reading %v, %d samples, want %d", k, runErr, readErr, len(seen), want)
			}
			continue
		}
		failed++
		if !errors.Is(runErr, producer.ErrNodeSkip) || !errors.Is(readErr, batchstore.ErrProducerFailed) || !strings.Contains(runErr.Error(), "zz-") {
			t.Fatalf("node %d of 2 with a bad sample in its share: producer %v, reading %v; want the run failed naming the sample", k, runErr, readErr)
		}
	}
	if failed == 0 || clean == 0 {
		t.Fatalf("the bad sample fell in %d shares of 2 (clean %d)", failed, clean)
	}
}
