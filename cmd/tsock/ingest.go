package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/tsock/tsock/fs"
)

// ingestFiles adapts the ingest side to the file system's ingest/.
type ingestFiles struct{ d *daemon }

var _ fs.Ingest = ingestFiles{}

func (f ingestFiles) Create(ctx context.Context, seq uint64) (fs.IngestWriter, error) {
	return f.d.ingest.Create(ctx, seq)
}
func (f ingestFiles) Next() uint64                              { return f.d.ingest.Next() }
func (f ingestFiles) Order(ctx context.Context) ([]byte, error) { return f.d.ingest.Order(ctx) }
func (f ingestFiles) Skip(value string) error                   { return f.d.ingest.Skip(value) }
func (f ingestFiles) Grow(value string) error                   { return f.d.ingest.Grow(value) }

// SamplesText renders ingest/samples: the dataset's size now (0:
// unordered).
func (f ingestFiles) SamplesText() ([]byte, error) {
	return []byte(strconv.Itoa(f.d.ingest.Samples()) + "\n"), nil
}

// Status renders ingest/status: one "key: value" per line.
func (f ingestFiles) Status() ([]byte, error) {
	c := f.d
	st := c.ingest.Snapshot()
	var b strings.Builder
	fmt.Fprintf(&b, "mode: %s\n", c.ingestModeName())
	fmt.Fprintf(&b, "next: %06d\n", c.ingest.Next())
	fmt.Fprintf(&b, "epoch: %d\n", st.Epoch)
	fmt.Fprintf(&b, "position: %d\n", st.Position)
	if c.ingest.Ordered() {
		fmt.Fprintf(&b, "epoch length: %d\n", st.EpochLen)
		fmt.Fprintf(&b, "samples: %d", st.Samples)
		if st.Added > 0 {
			fmt.Fprintf(&b, " (%d added through ingest/samples, the last %d from producer epoch %d)", st.Added, st.LastAdded, st.LastAddedEpoch)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "published: %d batches, %s\n", st.Published, humanize.IBytes(uint64(st.PublishedBytes)))
	fmt.Fprintf(&b, "refused: %d\n", st.Refused)
	if st.LastRefusal != "" {
		fmt.Fprintf(&b, "last refusal: %s\n", printable(st.LastRefusal))
	}
	fmt.Fprintf(&b, "skipped samples: %d\n", st.Skipped)
	if len(st.RecentSkips) > 0 {
		fmt.Fprintf(&b, "recently skipped: %v\n", st.RecentSkips)
	}
	if st.Writing != "" {
		fmt.Fprintf(&b, "writing: %s\n", st.Writing)
	}
	if st.LastWrite.IsZero() {
		fmt.Fprintf(&b, "last write: never\n")
	} else {
		fmt.Fprintf(&b, "last write: %s ago\n", time.Since(st.LastWrite).Round(time.Millisecond))
	}
	fmt.Fprintf(&b, "write path: %s\n", c.mounted.IngestPath())
	return []byte(b.String()), nil
}

// Refusal renders ingest/refusal: "NNNNNN: why", the last batch refused.
func (f ingestFiles) Refusal() ([]byte, error) {
	why := f.d.ingest.Snapshot().LastRefusal
	if why == "" {
		return nil, nil
	}
	return []byte(printable(why) + "\n"), nil
}

// ingestMode names the ingest mode for status lines.
func (d *daemon) ingestModeName() string {
	if d.ingest.Ordered() {
		return fmt.Sprintf("ordered, %d samples (tsock's order: ingest/order)", d.ingest.Samples())
	}
	return "unordered (the producer's epoch marks)"
}

// ingestDescription is the source line for --ingest.
func (d *daemon) ingestDescription() string { return "ingest, " + d.ingestModeName() }
