package ingest

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"github.com/tsock/tsock/batchstore"
	"github.com/tsock/tsock/batchstore/batchfile"
	"github.com/tsock/tsock/batchstore/memfile"
)

// orderState is ordered mode's place in the sampler.
type orderState struct {
	epoch  int
	order  []int // the epoch's order of dataset indices, once fixed
	fixed  bool
	prev   []int // the previous epoch's order
	pos    int   // the next order position to publish
	handed int   // positions handed out by Order so far
	index  int   // batches published in the epoch
	bad    map[int]bool
}

// Order waits until some consumer needs samples, then renders what to
// make next: a line "EPOCH POSITION COUNT LENGTH" (LENGTH: samples in
// the epoch's order), then COUNT dataset indices, one per line. Reading it again before publishing gives the same run
// (a restarted producer resumes there).
func (in *Ingest) Order(ctx context.Context) ([]byte, error) {
	if !in.Ordered() {
		return nil, fmt.Errorf("%w: ingest/order needs --samples (ordered mode)", batchstore.ErrBadBatch)
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	o := &in.ord
	for {
		if o.fixed && o.pos >= len(o.order) {
			o.prev, o.order, o.fixed = o.order, nil, false
			o.epoch, o.pos, o.handed, o.index = o.epoch+1, 0, 0, 0
		}
		if o.fixed {
			break
		}
		e := o.epoch
		in.mu.Unlock()
		err := in.store.WaitNeed(ctx, e, 0)
		in.mu.Lock()
		if err != nil {
			return nil, err
		}
		if o.epoch == e && !o.fixed {
			in.fixOrder(e)
		}
	}
	e, from, n := o.epoch, o.pos, len(o.order)
	in.mu.Unlock()
	to, err := in.store.NeedUpTo(ctx, e, from, n)
	in.mu.Lock()
	if err != nil {
		return nil, err
	}
	if o.epoch != e || o.pos != from { // published meanwhile: the caller reads again
		to = from
	}
	o.handed = max(o.handed, to)
	var b strings.Builder
	fmt.Fprintf(&b, "%d %d %d %d\n", e, from, to-from, n)
	for _, idx := range o.order[from:to] {
		b.WriteString(strconv.Itoa(idx))
		b.WriteByte('\n')
	}
	return []byte(b.String()), nil
}

// fixOrder fixes epoch e's order in the store, atomically with joins.
// Callers hold in.mu.
func (in *Ingest) fixOrder(e int) {
	o := &in.ord
	prev := o.prev
	if prev == nil {
		prev = make([]int, in.samples)
		for i := range prev {
			prev[i] = i
		}
	}
	in.store.FixOrder(e, func(splits map[int]int, wanted func(int) bool) map[int]int {
		var out map[int]int
		o.order, out = batchstore.StitchOrder(prev, in.samples, splits, func(idx int) bool { return !o.bad[idx] }, wanted, in.shuffler(e))
		return out
	})
	o.fixed = true
	if len(o.order) == 0 { // every sample skipped: nothing more can be made
		in.store.EndEpoch(e)
	}
}

// placeOrdered checks that the batch's indices continue the order; the
// positions it passes over are skipped. Callers hold in.mu.
func (in *Ingest) placeOrdered(h *batchfile.Header, indices []int64) (batchstore.Info, func(), error) {
	o := &in.ord
	if !o.fixed || o.pos >= len(o.order) {
		return batchstore.Info{}, nil, fmt.Errorf("epoch %d has no order handed out: read ingest/order first", o.epoch)
	}
	if len(indices) != h.Samples {
		return batchstore.Info{}, nil, fmt.Errorf("ordered mode needs an I64 tensor \"indices\" of shape [%d] (the dataset index of each sample)", h.Samples)
	}
	p, first := o.pos, -1
	var skipped []int
	for i, idx := range indices {
		for p < o.handed && int64(o.order[p]) != idx {
			skipped = append(skipped, o.order[p])
			p++
		}
		if p == o.handed {
			return batchstore.Info{}, nil, fmt.Errorf("indices[%d] = %d does not continue the order: the next of the %d indices handed out (from position %d of epoch %d) is %d",
				i, idx, o.handed-o.pos, o.pos, o.epoch, o.order[o.pos])
		}
		if first < 0 {
			first = p
		}
		p++
	}
	if err := in.checkBudget(skipped); err != nil {
		return batchstore.Info{}, nil, err
	}
	info := batchstore.Info{Epoch: o.epoch, Index: o.index, Samples: h.Samples, FirstPos: first, EndPos: p, Last: p == len(o.order),
		Indices: make([]int32, len(indices))}
	for i, idx := range indices {
		info.Indices[i] = int32(idx) // within [0, Samples): the order holds nothing else
	}
	return info, func() {
		in.skip(skipped)
		o.pos, o.index = p, o.index+1
	}, nil
}

// skip marks dataset indices as samples the producer could not make:
// counted, and left out of later epochs. Callers hold in.mu.
func (in *Ingest) skip(indices []int) {
	for _, idx := range indices {
		if !in.ord.bad[idx] {
			in.ord.bad[idx] = true
			in.stats.Skipped++
		}
		in.stats.RecentSkips = append(in.stats.RecentSkips, idx)
		if len(in.stats.RecentSkips) > 5 {
			in.stats.RecentSkips = in.stats.RecentSkips[1:]
		}
	}
}

// checkBudget fails the run if skipping indices (a Skip, or the gaps a
// batch passes over: both are samples the producer could not make)
// takes the distinct samples skipped past --max-skipped: readers get the
// failure, not an epoch of what is left. Callers hold in.mu.
func (in *Ingest) checkBudget(indices []int) error {
	n := in.stats.Skipped
	for _, idx := range indices {
		if !in.ord.bad[idx] {
			n++
		}
	}
	err := in.cfg.MaxSkipped.Check(n, in.samples)
	if err != nil {
		in.store.Fail(err)
	}
	return err
}

// Skip says the producer cannot make the next samples of the order:
// value is their dataset indices, separated by spaces or newlines, in
// order. Anything else is refused and changes nothing.
func (in *Ingest) Skip(value string) error {
	fields := strings.Fields(value)
	in.mu.Lock()
	defer in.mu.Unlock()
	o := &in.ord
	if !in.Ordered() || !o.fixed {
		return fmt.Errorf("%w: skip needs ordered mode and an order handed out", batchstore.ErrBadBatch)
	}
	if len(fields) == 0 || o.pos+len(fields) > o.handed {
		return fmt.Errorf("%w: skip %d indices: %d are handed out and not made", batchstore.ErrBadBatch, len(fields), o.handed-o.pos)
	}
	skipped := make([]int, len(fields))
	for i, f := range fields {
		idx, err := strconv.Atoi(f)
		if err != nil || idx != o.order[o.pos+i] {
			return fmt.Errorf("%w: skip %q: the next index of the order is %d", batchstore.ErrBadBatch, f, o.order[o.pos+i])
		}
		skipped[i] = idx
	}
	if err := in.checkBudget(skipped); err != nil {
		return err
	}
	in.skip(skipped)
	o.pos += len(skipped)
	if o.pos == len(o.order) {
		in.store.EndEpoch(o.epoch)
	}
	return nil
}

// epochState is unordered mode's place in the producer's epochs.
type epochState struct {
	epoch    int
	label    string // the producer's epoch metadata
	started  bool   // a batch of epoch was published
	pos      int    // samples of it published
	index    int
	lastSaid bool // the last batch said "last": the next starts an epoch
}

// placeUnordered follows the producer's epoch marks: a new "epoch"
// value, or a batch after one marked "last", starts the next epoch.
// Callers hold in.mu.
func (in *Ingest) placeUnordered(h *batchfile.Header) (batchstore.Info, func(), error) {
	s := &in.epochs
	label, ok := h.Meta["epoch"]
	if !ok {
		label = s.label
	}
	if last, ok := h.Meta["last"]; ok && last != "true" && last != "false" {
		return batchstore.Info{}, nil, fmt.Errorf("metadata last=%q: want true or false", last)
	}
	if s.lastSaid || (s.started && label != s.label) {
		if !s.lastSaid {
			in.store.EndEpoch(s.epoch) // before the next epoch's first batch
		}
		s.epoch, s.pos, s.index, s.started, s.lastSaid = s.epoch+1, 0, 0, false, false
	}
	s.label = label
	info := batchstore.Info{Epoch: s.epoch, Index: s.index, Samples: h.Samples, FirstPos: s.pos, EndPos: s.pos + h.Samples,
		Last: h.Meta["last"] == "true"}
	return info, func() {
		s.started, s.pos, s.index, s.lastSaid = true, s.pos+h.Samples, s.index+1, info.Last
	}, nil
}

// readIndices reads the batch's "indices" tensor, if it is I64 [B].
func readIndices(f *memfile.File, h *batchfile.Header) ([]int64, error) {
	t := h.Tensor("indices")
	if t == nil || t.Dtype != "I64" || len(t.Shape) != 1 {
		return nil, nil
	}
	buf := make([]byte, t.End-t.Begin)
	if _, err := f.ReadAt(buf, h.DataStart+t.Begin); err != nil {
		return nil, err
	}
	out := make([]int64, len(buf)/8)
	for i := range out {
		out[i] = int64(binary.LittleEndian.Uint64(buf[8*i:]))
	}
	return out, nil
}

// relayout writes h's header again with meta. It keeps the data where
// it is when the new header fits before it (producers that pad their
// header to a page, as tsock's client does); else it moves the data to
// the next page boundary.
func relayout(f *memfile.File, h *batchfile.Header, meta map[string]string) error {
	out := &batchfile.Header{Meta: meta, Tensors: h.Tensors}
	hdr := out.EncodeAtLeast(1, h.DataStart)
	if int64(len(hdr)) > h.DataStart {
		hdr = out.EncodeAtLeast(batchfile.PageSize, 0)
		if err := f.MoveData(h.DataStart, int64(len(hdr)), h.Size()-h.DataStart); err != nil {
			return fmt.Errorf("lay the batch out again: %w", err)
		}
	}
	if _, err := f.WriteAt(hdr, 0); err != nil {
		return err
	}
	h.Meta, h.DataStart = meta, out.DataStart
	return nil
}
