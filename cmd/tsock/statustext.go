package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
)

// statusText is MOUNTPOINT/status: the status document (status.json's)
// said for people, one "key: value" per line. It reads the document
// alone, as `tsock status` and the Python client do, so that the text,
// the view and status.json say one thing (the fixtures in
// scripts/python/tests/fixtures/status hold all three to it).
func statusText(doc statusDoc) string {
	var b strings.Builder
	p := doc.Producer
	epochs := "forever"
	if p.Epochs > 0 {
		epochs = fmt.Sprint(p.Epochs)
	}
	if in := doc.Ingest; in != nil {
		fmt.Fprintf(&b, "source: %s\n", doc.Source)
		fmt.Fprintf(&b, "batch size: %d (consumers' default)\n", p.BatchSize)
		fmt.Fprintf(&b, "epoch: %d of %s (%d samples of it published)\n", p.Epoch, epochs, p.EpochDone)
		fmt.Fprintf(&b, "state: %s\n", doc.StateText)
		last := "never"
		if in.LastWrite >= 0 {
			last = seconds(in.LastWrite).Round(time.Second).String() + " ago"
		}
		fmt.Fprintf(&b, "ingest: next %06d, %d refused, %d samples skipped, last write %s; %s\n",
			in.Next, in.Refused, doc.Skipped, last, in.Path)
	} else {
		fmt.Fprintf(&b, "source: %s\n", printable(doc.Source))
		fmt.Fprintf(&b, "samples: %d\n", doc.Samples)
		fmt.Fprintf(&b, "classes: %d\n", doc.Classes)
		if t := doc.Transform; t != nil {
			fmt.Fprintf(&b, "transform: %s, %dx%d %s, batch size %d, seed %d, %d workers\n",
				t.Name, t.ImageSize, t.ImageSize, t.Layout, p.BatchSize, t.Seed, t.Workers)
		}
		if n := doc.Node; n != nil {
			fmt.Fprintf(&b, "node: %d of %d, each consumer's share of its data (fingerprint %s%s)\n", n.Index, n.Count, n.Fingerprint, fromText(n.From))
		}
		fmt.Fprintf(&b, "decoder: %s\n", doc.Decoder)
		fmt.Fprintf(&b, "epoch: %d of %s (%d of %d samples)\n", p.Epoch, epochs, p.EpochDone, p.EpochLen)
		fmt.Fprintf(&b, "state: %s\n", doc.StateText)
	}
	buf := doc.Buffer
	fmt.Fprintf(&b, "produced: %d batches, %d samples\n", p.Batches, p.Samples)
	fmt.Fprintf(&b, "produce rate: %.0f samples/s (last 10s), %.0f samples/s (overall)\n", p.Rate, p.RateOverall)
	fmt.Fprintf(&b, "producer waited for room: %s\n", seconds(p.Waited).Round(time.Millisecond))
	fmt.Fprintf(&b, "buffer: %s used of %s (%d batches held, %s being written)\n",
		humanize.IBytes(uint64(buf.Used)), humanize.IBytes(uint64(buf.Limit)), buf.Batches, humanize.IBytes(uint64(buf.Reserved)))
	// With passthrough a reader's mapping keeps a batch's memory after its
	// close: that memory is part of the buffer too.
	mapped := humanize.IBytes(uint64(max(buf.Mapped, 0))) + " (part of the buffer)"
	if buf.Mapped < 0 {
		mapped = "unknown (memfd batch storage cannot tell; the private tmpfs, as root, can)"
	}
	fmt.Fprintf(&b, "released but still mapped: %s\n", mapped)
	if doc.Unwatched >= 0 {
		bound := "until one joins or the mount stops (--idle-exit bounds this)"
		if doc.IdleExit > 0 {
			bound = fmt.Sprintf("until one joins, or %s without one (--idle-exit)", seconds(doc.IdleExit))
		}
		fmt.Fprintf(&b, "unwatched: no consumer for %s; %s of batches held for the next to join, %s\n",
			seconds(doc.Unwatched).Round(time.Second), humanize.IBytes(uint64(buf.Used)), bound)
	}
	fmt.Fprintf(&b, "data path: %s\n", doc.DataPath)
	// Batches read are forgotten by the kernel soon after: a number that
	// keeps growing in a long run is memory that is not coming back.
	pruning := "forgotten once released"
	if !doc.PrunesInodes {
		pruning = "kept until memory pressure: this kernel cannot be asked to forget them (NOTIFY_PRUNE, Linux 6.16+)"
	}
	fmt.Fprintf(&b, "batch inodes held by the kernel: %d (%s)\n", doc.BatchInodes, pruning)
	if g := doc.GPU; g != nil {
		gpuText(&b, g, doc.Consumers)
	}
	if cs := doc.Cache; cs != nil {
		where := "in memory"
		if cs.Dir != "" {
			where = "on disk in " + printable(cs.Dir)
		}
		rate := 0.0
		if cs.Hits+cs.Misses > 0 {
			rate = float64(cs.Hits) / float64(cs.Hits+cs.Misses)
		}
		fmt.Fprintf(&b, "raw cache: %s of %s %s, %d files; hit rate %.0f%% (%d hits, %d misses)\n",
			humanize.IBytes(uint64(cs.Used)), humanize.IBytes(uint64(cs.Limit)), where, cs.Files, 100*rate, cs.Hits, cs.Misses)
		if cs.Dropped > 0 {
			fmt.Fprintf(&b, "  not kept: %d files (writes to the cache directory failed: a full disk?)\n", cs.Dropped)
		}
	}
	if doc.Ingest == nil {
		pipelineText(&b, doc)
	}
	if doc.FreeErrors > 0 {
		fmt.Fprintf(&b, "free errors: %d (last: %s)\n", doc.FreeErrors, printable(doc.LastFreeError))
	}
	fmt.Fprintf(&b, "consumers: %d\n", len(doc.Consumers))
	for _, cs := range doc.Consumers {
		fmt.Fprintf(&b, "  %s\n", consumerLine(cs))
		for _, r := range cs.Ranks {
			fmt.Fprintf(&b, "    rank %d of %d: %s, position %d, epoch %s, read %d batches\n", r.Rank, cs.World, r.State, r.Position, epochText(r.Epoch), r.BatchesRead)
		}
	}
	return b.String()
}

// pipelineText is what status says of the built-in pipeline's source:
// skips, kept samples, rescans, the object store, shards and the shuffle.
func pipelineText(b *strings.Builder, doc statusDoc) {
	fmt.Fprintf(b, "skipped inputs: %d\n", doc.Skipped)
	if doc.Missing > 0 {
		fmt.Fprintf(b, "keys missing this epoch: %d (held out of it; skipped once a listing at its end shows the dataset still there, else the run fails)\n", doc.Missing)
	}
	if k := doc.Kept; k != nil {
		fmt.Fprintf(b, "kept: %s of %s, %d samples made once and copied into later epochs (%d copies)",
			humanize.IBytes(uint64(k.Used)), humanize.IBytes(uint64(k.Limit)), k.Samples, k.Served)
		if k.Refused > 0 {
			fmt.Fprintf(b, "; %d makings not kept: the set does not fit in --keep, the rest is decoded every epoch", k.Refused)
		}
		b.WriteString("\n")
	}
	if r := doc.Rescan; r != nil {
		fmt.Fprintf(b, "rescans added: %d samples", r.Added)
		if r.LastAdded > 0 {
			fmt.Fprintf(b, " (last %d, before producer epoch %d, %s ago)", r.LastAdded, r.LastEpoch, seconds(r.LastAge).Round(time.Second))
		}
		fmt.Fprintf(b, "; removed: %d samples (their files left the folder: out of the dataset, not skipped)\n", doc.Removed)
	}
	for _, r := range doc.RecentSkips {
		fmt.Fprintf(b, "  skipped: %s\n", printable(r))
	}
	if r := doc.Remote; r != nil {
		fmt.Fprintf(b, "remote: %s; %s/s over the last 10 s\n", r.Summary, humanize.IBytes(uint64(r.Rate)))
	}
	if sh := doc.Shards; sh != nil {
		b.WriteString(shardsLine(sh))
	}
	if r := doc.Shuffle; r != nil {
		b.WriteString(r.line())
	}
	if doc.LeftOut > 0 {
		fmt.Fprintf(b, "left out when the source was listed or indexed: %d (%d samples, counted against --max-skipped)\n", doc.LeftOut, doc.LeftOutSamples)
		for _, l := range doc.LeftOutFirst {
			fmt.Fprintf(b, "  left out: %s\n", printable(l))
		}
	}
}

// gpuText is status's lines on the GPU: its slabs, the upload path, and
// each consumer's memory on it as NVML reports it.
func gpuText(b *strings.Builder, g *gpuDoc, consumers []consumerDoc) {
	held := int64(g.Slabs) * g.SlabSize
	fmt.Fprintf(b, "gpu: %s (%s, cuda:%d): %d slabs of %s = %s held by tsock, %d holding a batch",
		g.UUID, g.Name, g.Ordinal, g.Slabs, humanize.IBytes(uint64(g.SlabSize)), humanize.IBytes(uint64(held)), g.InUse)
	if g.MemInfo {
		fmt.Fprintf(b, "; device %s free of %s", humanize.IBytes(uint64(g.Free)), humanize.IBytes(uint64(g.Total)))
	}
	b.WriteString("\n")
	fmt.Fprintf(b, "gpu upload: %s\n", g.Upload)
	if !g.NVML {
		fmt.Fprintf(b, "gpu memory by consumer: unknown (%s)\n", g.NVMLWhy)
		return
	}
	b.WriteString("gpu memory by consumer (NVML):\n")
	for _, cs := range consumers {
		if cs.GPUPid != 0 && cs.GPUMemory != nil {
			fmt.Fprintf(b, "  %s: pid %d, %s\n", cs.Name, cs.GPUPid, humanize.IBytes(uint64(max(*cs.GPUMemory, 0))))
		} else {
			fmt.Fprintf(b, "  %s: none reported\n", cs.Name)
		}
	}
}

// shardsLine is status's line on piece reading: what is held of the
// shard memory and disk, what was read, how the next epochs' first pieces
// fared (read ahead in vain: a consumer joined and the epoch was
// stitched), and the index file.
func shardsLine(sh *shardsDoc) string {
	labels := ""
	if sh.Labels != "" {
		labels = "labels: " + printable(sh.Labels) + "\n"
	}
	if sh.Alone != "" {
		return "shards: read a sample at a time: " + sh.Alone + "\n" + labels
	}
	line := fmt.Sprintf("shards: read in %d pieces of %s; %d held (%s of %s shard memory and %s shard disk, %s of it in use), %d being read; %d read (%s); next epochs' first pieces: %d carried, %d read ahead in vain",
		sh.Pieces, humanize.IBytes(uint64(sh.PieceBytes)), sh.Held, humanize.IBytes(uint64(sh.HeldBytes)), humanize.IBytes(uint64(sh.Memory)),
		humanize.IBytes(uint64(sh.Disk)), humanize.IBytes(uint64(sh.DiskUsed)), sh.Reading, sh.Reads,
		humanize.IBytes(uint64(sh.ReadBytes)), sh.Carried, sh.Wasted)
	if sh.Index != "" {
		line += "; index " + printable(sh.Index)
	}
	return line + "\n" + labels
}

// consumerLine is one consumer in status.
func consumerLine(cs consumerDoc) string {
	subset := cs.Subset
	if subset != "all" {
		subset = fmt.Sprintf("%s (%d samples)", cs.Subset, cs.SubsetSize)
	}
	epoch := "none yet"
	if cs.Epoch >= 0 {
		epoch = strconv.Itoa(cs.Epoch)
	}
	name := cs.Name
	if cs.World > 0 {
		name = fmt.Sprintf("%s (a group of %d ranks, batch size %d each)", cs.Name, cs.World, cs.BatchSize)
	}
	return fmt.Sprintf("%s: %s, subset %s, position %d, epoch %s, lag %d, read %d batches (%s)",
		name, cs.StateText, subset, cs.Position, epoch, cs.Lag, cs.BatchesRead, humanize.IBytes(uint64(cs.BytesRead)))
}

// seconds is a document's seconds as a duration, to the nanosecond.
func seconds(s float64) time.Duration { return time.Duration(math.Round(s * float64(time.Second))) }

func epochText(e int) string {
	if e < 0 {
		return "none yet"
	}
	return strconv.Itoa(e)
}

// fromText says where a setting came from, where not its flag.
func fromText(from string) string {
	if from == "" {
		return ""
	}
	return ", from " + from
}
