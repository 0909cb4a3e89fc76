package batchstore

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
)

// Text renders a consumer's state for consumers/NAME/status: one
// "key: value" per line, values human-readable.
func (c ConsumerSnapshot) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\n", c.Name)
	fmt.Fprintf(&b, "state: %s\n", c.state())
	how := "aligned with the producer's epochs"
	if c.Stitched {
		how = "its epochs stitched across two producer epochs"
	}
	fmt.Fprintf(&b, "joined at: producer epoch %d, sample %d (%s)\n", c.JoinedEpoch, c.JoinedPos, how)
	fmt.Fprintf(&b, "batch size: %d\n", c.BatchSize)
	if c.World > 0 {
		fmt.Fprintf(&b, "world: %d ranks (%s)\n", c.World, dropText(c.DropLast))
	}
	for _, r := range c.Ranks {
		fmt.Fprintf(&b, "rank %d: position %d, epoch %s, %d batches read%s\n", r.Rank, r.Position, epochText(r.Epoch), r.BatchesRead, rankState(r))
	}
	if c.ShortBatches > 0 {
		fmt.Fprintf(&b, "short batches: %d (its subset is sparse for the buffer: raise the buffer size for full ones)\n", c.ShortBatches)
	}
	fmt.Fprintf(&b, "subset: %s\n", c.subsetText())
	if c.NextSubset != "" {
		fmt.Fprintf(&b, "next subset: %s, from its epoch %d\n", c.NextSubset, c.NextFrom)
	}
	if c.SubsetRefused != "" {
		fmt.Fprintf(&b, "last subset refused: %s\n", strconv.Quote(c.SubsetRefused))
	}
	fmt.Fprintf(&b, "position: %d\n", c.Position)
	fmt.Fprintf(&b, "epoch: %s\n", epochText(c.Epoch))
	fmt.Fprintf(&b, "lag: %d batches (%s)\n", c.Lag, humanize.IBytes(uint64(c.LagBytes)))
	fmt.Fprintf(&b, "batches read: %d\n", c.BatchesRead)
	fmt.Fprintf(&b, "samples read: %d\n", c.SamplesRead)
	fmt.Fprintf(&b, "bytes read: %s\n", humanize.IBytes(uint64(c.BytesRead)))
	fmt.Fprintf(&b, "open batches: %d\n", c.OpenBatches)
	fmt.Fprintf(&b, "waiting: %s (%.0f%% of %s)\n", c.WaitTotal.Round(time.Millisecond),
		100*c.WaitTotal.Seconds()/max(c.Age.Seconds(), 1e-9), c.Age.Round(time.Second))
	if c.Deadlock != "" {
		fmt.Fprintf(&b, "deadlock: its waits fail with EDEADLK: %s\n", c.Deadlock)
	}
	return b.String()
}

func (c ConsumerSnapshot) subsetText() string {
	if c.SubsetLen == 0 {
		return c.Subset
	}
	return fmt.Sprintf("%s (%d samples)", c.Subset, c.SubsetLen)
}

// StateText says the consumer's state for people: State, and why it was
// evicted or since when it waits.
func (c ConsumerSnapshot) StateText() string { return c.state() }

// State is the consumer's state as one word, for programs
// (consumers/NAME/state): reading, waiting, done or evicted.
func (c ConsumerSnapshot) State() string {
	switch {
	case c.Evicted != "":
		return "evicted"
	case c.Done:
		return "done"
	case c.Waiting:
		return "waiting"
	}
	return "reading"
}

func (c ConsumerSnapshot) state() string {
	switch {
	case c.Evicted != "":
		return "evicted: " + c.Evicted
	case c.Done:
		return "done"
	case c.Waiting && len(c.Missing) > 0:
		return fmt.Sprintf("waiting for ranks %v of %d to join", c.Missing, c.World)
	case c.Waiting:
		// Where a producer died (an outside one, through ingest/), this is
		// how long nothing came.
		return fmt.Sprintf("waiting for the producer: no batch published since %s (%s ago)",
			c.LastPublished.Format(time.TimeOnly), time.Since(c.LastPublished).Round(time.Second))
	}
	return "reading"
}

func epochText(e int) string {
	if e < 0 {
		return "none yet"
	}
	return fmt.Sprint(e)
}

func dropText(drop bool) string {
	if drop {
		return "an epoch's uneven tail dropped"
	}
	return "an epoch's uneven tail padded"
}

func rankState(r RankSnapshot) string {
	switch {
	case r.Done:
		return ", done"
	case r.Waiting:
		return ", waiting"
	}
	return ""
}
