package main

import (
	"fmt"
	"log/slog"
	"math"

	"github.com/tsock/tsock/producer/pipeline"
	"github.com/tsock/tsock/producer/source"
)

// shuffleReach is how far a training epoch's shuffle reaches and how it
// mixes: the samples a batch can draw from, against the dataset's, and
// the distinct labels a batch holds, against a uniform shuffle's. A
// uniform shuffle reaches all of them; tar shards are read in pieces
// (whole shards, or parts of 8 MiB or more) and shuffled within a window
// of the pieces held at once (the shard memory and disk), and where each
// shard holds few classes (shards converted from a class-sorted folder) a
// narrow window makes batches of few classes: BatchNorm statistics and
// gradients of a few classes at a time. Status says it, and warns where
// a batch holds under mixedEnough of a uniform shuffle's labels (or,
// where the samples carry no labels to judge by, the window holds under
// 1/farShuffle of the dataset).
type shuffleReach struct {
	Kind     string  `json:"kind"` // "uniform", "piece window" or "none" (eval: the dataset's order)
	Reach    int     `json:"reach_samples"`
	Samples  int     `json:"samples"`
	Window   int     `json:"window_pieces,omitempty"`
	Pieces   int     `json:"pieces,omitempty"`
	Shards   int     `json:"shards,omitempty"`
	Batch    int     `json:"batch_size,omitempty"`
	Distinct float64 `json:"distinct_labels_per_batch,omitempty"`
	Uniform  float64 `json:"uniform_distinct_labels_per_batch,omitempty"`
	Warning  string  `json:"warning,omitempty"`
}

// farShuffle is the share of the dataset under which a window is far
// below a uniform shuffle's reach; mixedEnough, the share of a uniform
// shuffle's distinct labels a batch should hold.
const (
	farShuffle  = 4
	mixedEnough = 0.9
)

func (d *daemon) shuffleReach(sh *source.ShardStats) *shuffleReach {
	if d.cfg.Source == nil {
		return nil // ingest: the outside producer's own order
	}
	n := d.cfg.Source.Len()
	switch {
	case d.cfg.Transform != pipeline.Train:
		return &shuffleReach{Kind: "none", Reach: 0, Samples: n}
	case sh == nil || sh.Window == 0 || sh.Window >= sh.Pieces:
		return &shuffleReach{Kind: "uniform", Reach: n, Samples: n}
	}
	r := &shuffleReach{Kind: "piece window", Reach: sh.WindowSamples, Samples: n, Window: sh.Window, Pieces: sh.Pieces, Shards: sh.Shards}
	if m := sh.Mix; m.Judged {
		r.Batch, r.Distinct, r.Uniform = m.Batch, round1(m.Distinct), round1(m.Uniform)
	}
	switch {
	case sh.Mix.Judged && sh.Mix.Distinct < mixedEnough*sh.Mix.Uniform:
		r.Warning = "a batch holds fewer labels than a uniform shuffle's: the shards hold few classes each (converted from a class-sorted folder); widen the window with --shard-disk (a local disk: --shard-disk-dir) or --shard-memory"
	case !sh.Mix.Judged && farShuffle*sh.WindowSamples < n:
		r.Warning = "far below a uniform shuffle's reach: where shards hold few classes each (converted from a class-sorted folder), a batch holds few classes; widen it with --shard-disk (a local disk: --shard-disk-dir) or --shard-memory"
	}
	return r
}

// round1 keeps one decimal, for status.json.
func round1(x float64) float64 { return math.Round(x*10) / 10 }

// line is status's line on it.
func (r *shuffleReach) line() string {
	switch r.Kind {
	case "none":
		return "shuffle: none (eval: the dataset's order)\n"
	case "uniform":
		return fmt.Sprintf("shuffle: uniform over all %d samples\n", r.Samples)
	}
	line := fmt.Sprintf("shuffle: a batch draws from a window of %d of %d pieces of %d shards (about %d of %d samples)", r.Window, r.Pieces, r.Shards, r.Reach, r.Samples)
	if r.Batch > 0 {
		line += fmt.Sprintf("; a batch of %d holds %.1f distinct labels (a uniform shuffle: %.1f)", r.Batch, r.Distinct, r.Uniform)
	}
	if r.Warning != "" {
		line += "; " + r.Warning
	}
	return line + "\n"
}

// warnShuffle says at mount what status will say: a sweep's trials learn
// worse from batches of few classes, and the user should know before
// days of training.
func (d *daemon) warnShuffle() {
	sh, ok := source.As[source.Sharded](d.cfg.Source)
	if !ok {
		return
	}
	st := sh.Stats()
	if r := d.shuffleReach(&st); r != nil && r.Warning != "" {
		slog.Warn("the shuffle mixes less than a uniform one", "window_pieces", r.Window, "pieces", r.Pieces,
			"distinct_labels_per_batch", r.Distinct, "uniform", r.Uniform, "reach_samples", r.Reach, "samples", r.Samples, "why", r.Warning)
	}
}
