package main

import (
	"fmt"
	"log/slog"

	"github.com/tsock/tsock/producer/pipeline"
	"github.com/tsock/tsock/producer/source"
)

// shuffleReach is how far a training epoch's shuffle reaches: the samples
// a batch can draw from, against the dataset's. A uniform shuffle reaches
// all of them; tar shards read whole are shuffled within a window of the
// shards held at once (their memory), and where each shard holds few
// classes (shards converted from a class-sorted folder) a batch then
// holds few classes: BatchNorm statistics and gradients of a few classes
// at a time. Status says it, and warns below farShuffle.
type shuffleReach struct {
	Kind    string `json:"kind"` // "uniform", "shard window" or "none" (eval: the dataset's order)
	Reach   int    `json:"reach_samples"`
	Samples int    `json:"samples"`
	Shards  int    `json:"window_shards,omitempty"`
	Of      int    `json:"shards,omitempty"`
	Warning string `json:"warning,omitempty"`
}

// farShuffle is the share of the dataset under which a window is far
// below a uniform shuffle's reach.
const farShuffle = 4

func (c *mountCommand) shuffleReach(sh *source.ShardStats) *shuffleReach {
	if c.cfg.Source == nil {
		return nil // ingest: the outside producer's own order
	}
	n := c.cfg.Source.Len()
	switch {
	case c.cfg.Transform != pipeline.Train:
		return &shuffleReach{Kind: "none", Reach: 0, Samples: n}
	case sh == nil || sh.Window == 0 || sh.Window >= sh.Shards:
		return &shuffleReach{Kind: "uniform", Reach: n, Samples: n}
	}
	r := &shuffleReach{Kind: "shard window", Reach: sh.WindowSamples, Samples: n, Shards: sh.Window, Of: sh.Shards}
	if farShuffle*sh.WindowSamples < n {
		r.Warning = "far below a uniform shuffle's reach: where shards hold few classes each (converted from a class-sorted folder), a batch holds few classes; widen it with --shard-memory (the window is half of it)"
	}
	return r
}

// line is status's line on it.
func (r *shuffleReach) line() string {
	switch r.Kind {
	case "none":
		return "shuffle: none (eval: the dataset's order)\n"
	case "uniform":
		return fmt.Sprintf("shuffle: uniform over all %d samples\n", r.Samples)
	}
	line := fmt.Sprintf("shuffle: a batch draws from a window of %d of %d shards (about %d of %d samples)", r.Shards, r.Of, r.Reach, r.Samples)
	if r.Warning != "" {
		line += "; " + r.Warning
	}
	return line + "\n"
}

// warnShuffle says at mount what status will say: a sweep's trials learn
// worse from batches of few classes, and the user should know before
// days of training.
func (c *mountCommand) warnShuffle() {
	sh, ok := source.As[*source.Shards](c.cfg.Source)
	if !ok {
		return
	}
	st := sh.Stats()
	if r := c.shuffleReach(&st); r != nil && r.Warning != "" {
		slog.Warn("the shuffle reaches a small part of the dataset", "window_shards", r.Shards, "shards", r.Of,
			"reach_samples", r.Reach, "samples", r.Samples, "why", r.Warning)
	}
}
