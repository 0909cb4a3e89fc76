package plan

import (
	"fmt"
	"iter"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// stream is a producer's stream in memory: epochs of epochLen samples,
// each a permutation of the dataset (epochLen samples), published in
// batches of 1-3 samples up to published, all of them held. Split id's
// epochs end off[id] samples into each producer epoch (where the
// producer put what it missed).
type stream struct {
	epochLen  int
	published uint64
	epochs    int
	firsts    []uint64 // each published batch's first sample
	order     [][]int32
	off       map[int]uint64
}

func (s *stream) started(e int) bool { return uint64(e*s.epochLen) < s.published }

func (s *stream) EpochStart(e int) (uint64, bool) {
	return uint64(e * s.epochLen), s.started(e)
}

func (s *stream) SplitEnd(e, split int) (uint64, bool) {
	return uint64(e*s.epochLen) + s.off[split], s.started(e)
}

func (s *stream) Published() uint64 { return s.published }

func (s *stream) HeldAt(x uint64) (first, end uint64, indices []int32, ok bool) {
	if x >= s.published {
		return 0, 0, nil, false
	}
	k, found := slices.BinarySearch(s.firsts, x)
	if !found {
		k--
	}
	first, end = s.firsts[k], s.published
	if k+1 < len(s.firsts) {
		end = s.firsts[k+1]
	}
	for y := first; y < end; y++ {
		e := int(y) / s.epochLen
		indices = append(indices, s.order[e][int(y)%s.epochLen])
	}
	return first, end, indices, true
}

func (s *stream) NextHeld(x, limit uint64) uint64 { return min(x, limit) }
func (s *stream) Epochs() int                     { return s.epochs }

// index is global sample x's dataset index.
func (s *stream) index(x uint64) int {
	return int(s.order[int(x)/s.epochLen][int(x)%s.epochLen])
}

type subset []bool

func (s subset) Has(i int) bool { return s[i] }

// every is one subset for every epoch.
type every struct{ s Subset }

func (e every) SubsetFor(int) Subset { return e.s }

// TestNextAgainstAnOracle: for random streams, batch sizes, subsets and
// joins (at an epoch's start or mid-epoch, a split), the batches Next
// computes one after another, as the store asks for them, are exactly
// each of the consumer's epochs' samples of its subset, in stream order,
// cut into its batch size, short only at an epoch's end, never empty; and
// no batch is Known beyond what is published. The planner alone: no
// store, no goroutine, no wait.
func TestNextAgainstAnOracle(t *testing.T) {
	for seed := uint64(0); seed < 300; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { checkNext(t, seed) })
	}
}

func checkNext(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	s := &stream{epochLen: 5 + rng.IntN(12), epochs: rng.IntN(4), off: map[int]uint64{}}
	producerEpochs := 8
	for range producerEpochs {
		order := make([]int32, s.epochLen)
		for i, k := range rng.Perm(s.epochLen) {
			order[i] = int32(k)
		}
		s.order = append(s.order, order)
	}
	total := uint64(producerEpochs * s.epochLen)
	for x := uint64(0); x < total; x += uint64(1 + rng.IntN(3)) {
		s.firsts = append(s.firsts, x)
	}
	s.published = s.firsts[rng.IntN(len(s.firsts))] + 1 + uint64(rng.IntN(3))
	s.published = min(max(s.published, uint64(s.epochLen)+1), total)

	r := Reader{BatchSize: 1 + rng.IntN(4)}
	var sub subset
	if rng.IntN(2) == 0 {
		sub = make(subset, s.epochLen)
		for i := range sub {
			sub[i] = rng.IntN(3) > 0
		}
		r.Subsets = every{sub}
	}
	has := func(x uint64) bool { return sub == nil || sub.Has(s.index(x)) }
	// Where its epochs lie: aligned at producer epoch j, or a split at
	// offset o of it: its epoch k is [epochs[k].From, epochs[k].To), whose
	// end is known once the producer epoch that ends it has started.
	r.JoinEpoch = rng.IntN(2)
	start := uint64(r.JoinEpoch * s.epochLen)
	var epochs []Span
	var ender []int // the producer epoch whose start tells where epoch k ends
	first := r.JoinEpoch
	if rng.IntN(2) == 0 {
		o := uint64(1 + rng.IntN(s.epochLen-1))
		r.Split = 1
		s.off[1] = o
		start += o
		epochs = append(epochs, Span{start, uint64((r.JoinEpoch+1)*s.epochLen) + o})
		ender = append(ender, r.JoinEpoch+1)
		first = r.JoinEpoch + 2 // the rest of the producer epoch it ended in is not its
	}
	for e := first; e < producerEpochs; e++ {
		epochs = append(epochs, Span{uint64(e * s.epochLen), uint64((e + 1) * s.epochLen)})
		ender = append(ender, e+1)
	}
	// Its batches, as the store computes them: each from where the last
	// ended.
	var got []Batch
	b := Batch{Start: start}
	for {
		next := b
		state, short := Next(s, r, &next)
		if short {
			t.Fatalf("a short batch without AllowShort: %+v", next)
		}
		if state != Known {
			break
		}
		if next.End > s.published {
			t.Fatalf("batch %+v Known past the %d samples published", next, s.published)
		}
		got = append(got, next)
		b = Batch{Start: next.End, Epoch: next.Epoch, Index: next.Index + 1}
		if len(got) > 1000 {
			t.Fatal("no end")
		}
	}
	// The oracle: each epoch's samples of its subset, cut.
	var want []Batch
	for k := 0; k < len(epochs) && (s.epochs == 0 || k < s.epochs); k++ {
		var xs []uint64
		for x := epochs[k].From; x < epochs[k].To && x < s.published; x++ {
			if has(x) {
				xs = append(xs, x)
			}
		}
		complete := s.started(ender[k]) && epochs[k].To <= s.published
		for i := 0; i < len(xs); i += r.BatchSize {
			n := min(r.BatchSize, len(xs)-i)
			if n < r.BatchSize && !complete {
				break // the rest waits for more samples
			}
			want = append(want, Batch{Epoch: k, Index: i / r.BatchSize, Start: xs[i], End: xs[i+n-1] + 1})
		}
		if !complete {
			break
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d batches, the oracle %d (batch size %d, published %d, epochs %v)\ngot  %v\nwant %v", len(got), len(want), r.BatchSize, s.published, epochs, got, want)
	}
	for i := range got {
		g, w := got[i], want[i]
		var samples []uint64
		for _, sp := range g.Spans() {
			for x := sp.From; x < sp.To; x++ {
				samples = append(samples, x)
			}
		}
		if g.Epoch != w.Epoch || g.Index != w.Index || len(samples) == 0 || samples[0] != w.Start || samples[len(samples)-1]+1 != w.End {
			t.Fatalf("batch %d: %+v, the oracle's %+v", i, g, w)
		}
		for _, x := range samples {
			if !has(x) {
				t.Fatalf("batch %d holds sample %d, not of the subset", i, x)
			}
		}
		if uint64(len(samples)) != g.Samples() {
			t.Fatalf("batch %d: Samples %d, spans hold %d", i, g.Samples(), len(samples))
		}
	}
}

// TestPlace: where a joiner starts, for the stream's shapes the store
// meets.
func TestPlace(t *testing.T) {
	marks := map[int]Mark{
		0: {Start: 0, Started: true, Ended: true, OutputSoFar: 10, LastEndPos: 10},
		1: {Start: 10, Started: true, OutputSoFar: 4, LastEndPos: 4},
	}
	mark := func(e int) (Mark, bool) { m, ok := marks[e]; return m, ok }
	for _, tc := range []struct {
		name string
		j    Joining
		want Placement
	}{
		{"nothing published", Joining{Ordered: -1, Mark: func(int) (Mark, bool) { return Mark{}, false }},
			Placement{Epoch: 0}},
		{"epoch 1 held from its start", Joining{Ordered: 1, Newest: 1, Mark: mark, Published: 14,
			Tail: []Held{{Epoch: 1, First: 12, FirstPos: 2}, {Epoch: 1, First: 10, FirstPos: 0}}},
			Placement{Epoch: 1, Start: 10, StartKnown: true}},
		{"epoch 1 held from mid-epoch: a split", Joining{Ordered: 1, Newest: 1, Mark: mark, Published: 14,
			Tail: []Held{{Epoch: 1, First: 12, FirstPos: 2}}},
			Placement{Epoch: 1, Split: true, Output: 2, OrderPos: 2, Start: 12, StartKnown: true}},
		{"nothing of epoch 1 held: a split at the next batch", Joining{Ordered: 1, Newest: 1, Mark: mark, Published: 14},
			Placement{Epoch: 1, Split: true, Output: 4, OrderPos: 4, Start: 14, StartKnown: true}},
		{"epoch 0 held whole: read from its start", Joining{Ordered: 1, Newest: 1, Mark: mark, Published: 14,
			Tail: []Held{{Epoch: 1, First: 10}, {Epoch: 0, First: 5, FirstPos: 5}, {Epoch: 0, First: 0}}},
			Placement{Epoch: 0, Start: 0, StartKnown: true}},
		{"join at the next epoch", Joining{JoinAtEpoch: true, Ordered: 1, Newest: 1, Mark: mark, Published: 14},
			Placement{Epoch: 2}},
		{"unordered: the oldest held", Joining{Unordered: true, Newest: 1, Mark: mark, Published: 14, Oldest: Held{Epoch: 1, First: 11}, HasOldest: true},
			Placement{Epoch: 1, Start: 11, StartKnown: true}},
		{"unordered, nothing held, the newest epoch ended", Joining{Unordered: true, Newest: 0, Mark: mark, Published: 10},
			Placement{Epoch: 1, Start: 10, StartKnown: true}},
	} {
		if got := Place(tc.j); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// TestNeeds: a consumer needs a held batch from its lowest unread sample
// to its last epoch's end, nothing before or after, and nothing once it
// is inactive.
func TestNeeds(t *testing.T) {
	s := &stream{epochLen: 10, published: 30, epochs: 2, firsts: []uint64{0, 10, 20}, order: make([][]int32, 3)}
	for e := range s.order {
		s.order[e] = []int32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	}
	r := Reader{BatchSize: 5}
	var list BatchList
	list.Add(Batch{Start: 0, End: 5})
	list.Add(Batch{Start: 5, End: 10})
	r.Progress = Progress{Active: true, StartKnown: true, Start: 0, Low: 1, Batches: &list}
	for _, tc := range []struct {
		first, end uint64
		epoch      int
		want       bool
	}{
		{0, 5, 0, false},   // read
		{5, 10, 0, true},   // its lowest unread batch
		{10, 20, 1, true},  // its last epoch
		{20, 30, 2, false}, // past its two epochs
	} {
		if got := Needs(s, &r, tc.epoch, tc.first, tc.end); got != tc.want {
			t.Errorf("batch [%d,%d): Needs %v, want %v", tc.first, tc.end, got, tc.want)
		}
	}
	r.Active = false
	if Needs(s, &r, 0, 5, 10) {
		t.Error("an inactive consumer needs a batch")
	}
}

// TestAdmit: a subset is refused when its own batch, or another decided
// consumer's, would span more producer batches than the buffer holds
// under what all want together; admitted otherwise, and always while the
// buffer's capacity is not known.
func TestAdmit(t *testing.T) {
	// 1000 wanted samples in producer batches of 10, a buffer of 12.
	small := Want{Name: "a", BatchSize: 10, Subset: true, SubsetLen: 10} // a batch spans 10*1000/10/10+2 = 102
	wide := Want{Name: "b", BatchSize: 10, Subset: true, SubsetLen: 500} // 10*1000/500/10+2 = 4
	all := Want{Name: "c", BatchSize: 10}                                // 10/10+2 = 3
	for _, tc := range []struct {
		name   string
		joiner Want
		others []Want
		cap    int64
		refuse string
	}{
		{"a wide subset", wide, nil, 12, ""},
		{"a sparse subset", small, nil, 12, "spans about 102 producer batches, and the buffer holds 12"},
		{"everything, beside a wide subset", all, []Want{wide}, 12, ""},
		{"everything, beside a sparse one", all, []Want{small}, 12, "a's 10 would span about 102"},
		{"capacity not known yet", small, nil, 0, ""},
	} {
		err := Admit(tc.joiner, 1000, tc.others, tc.cap, 10)
		switch {
		case tc.refuse == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.refuse != "" && (err == nil || !strings.Contains(err.Error(), tc.refuse)):
			t.Errorf("%s: %v, want a refusal saying %q", tc.name, err, tc.refuse)
		}
	}
	if got := Spans(10, 0, 1000, 10); got != 3 {
		t.Errorf("Spans of a batch of everything: %d, want its own 1 and 2", got)
	}
}

// TestNeedBound: before the consumers' last epoch every position is
// needed; past it, only a late joiner's; a stitched first epoch that is a
// consumer's only one is needed up to its split, rounded up to the
// producer's batch.
func TestNeedBound(t *testing.T) {
	readers := func(js ...Joined) iter.Seq[Joined] { return slices.Values(js) }
	boundary := func(e, split int) (int, bool) { return 13, true }
	for _, tc := range []struct {
		name    string
		e       int
		epochs  int
		readers iter.Seq[Joined]
		want    int
	}{
		{"forever", 7, 0, readers(), 100},
		{"within the epochs", 1, 2, readers(), 100},
		{"past them, nobody", 2, 2, readers(Joined{JoinEpoch: 0}), 0},
		{"past them, a late joiner", 2, 2, readers(Joined{JoinEpoch: 1}), 100},
		{"a split's epoch after its stitched one", 3, 2, readers(Joined{JoinEpoch: 1, Split: 5}), 100},
		{"a split's only epoch, up to its split", 2, 1, readers(Joined{JoinEpoch: 1, Split: 5}), 16},
	} {
		if got := NeedBound(tc.e, 100, tc.epochs, 8, tc.readers, boundary); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}
