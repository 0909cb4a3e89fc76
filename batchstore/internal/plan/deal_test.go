package plan

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// roundsOf cuts an epoch of n samples (global samples from base, every
// other one in the subset when sparse) into rounds of world×batch as
// Next does for a group: full rounds, then the short rest.
func roundsOf(base uint64, n, world, batch int, sparse bool) []Batch {
	var rounds []Batch
	x := base
	for i, left := 0, n; left > 0; i++ {
		take := min(left, world*batch)
		r := Batch{Start: x, Epoch: 0, Index: i}
		if sparse {
			for range take {
				r.Picks = appendSpan(r.Picks, Span{x, x + 1})
				x += 2 // the sample between is not the group's
			}
		} else {
			x += uint64(take)
		}
		r.End = x
		rounds = append(rounds, r)
		left -= take
	}
	return rounds
}

// Over any epoch, world and batch size: each rank takes the same number
// of batches and of samples; with padding, every sample of the epoch is
// read and the repeats are fewer than world; with dropLast, no sample is
// read twice and fewer than world are left out. Full rounds give each
// rank a batch of the batch size, and the ranks' shares of a round are
// the round.
func TestShareDealsEvenly(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for trial := range 2000 {
		world, batch := 1+rng.IntN(8), 1+rng.IntN(9)
		n := 1 + rng.IntN(5*world*batch)
		sparse, dropLast := rng.IntN(2) == 0, rng.IntN(2) == 0
		rounds := roundsOf(1000, n, world, batch, sparse)
		inEpoch := map[uint64]bool{}
		for _, r := range rounds {
			for _, sp := range r.Spans() {
				for x := sp.From; x < sp.To; x++ {
					inEpoch[x] = true
				}
			}
		}
		seen := map[uint64]int{}
		steps := make([]int, world)
		samples := make([]int, world)
		for k, r := range rounds {
			last := k == len(rounds)-1
			var union []uint64
			for rank := range world {
				sh, ok := Share(r, rank, world, batch, last, dropLast)
				if !ok {
					if !last || !dropLast || int(r.Samples()) >= world {
						t.Fatalf("trial %d: round %d (%d samples) dealt nothing to rank %d of %d", trial, k, r.Samples(), rank, world)
					}
					continue
				}
				if sh.Start != r.Start || sh.End != r.End || sh.Index != r.Index {
					t.Fatalf("trial %d: a share lost its round's place: %+v of %+v", trial, sh, r)
				}
				if !last && int(sh.Samples()) != batch {
					t.Fatalf("trial %d: round %d gave rank %d %d samples, want the batch size %d", trial, k, rank, sh.Samples(), batch)
				}
				steps[rank]++
				samples[rank] += int(sh.Samples())
				for _, sp := range sh.Picks {
					for x := sp.From; x < sp.To; x++ {
						if !inEpoch[x] {
							t.Fatalf("trial %d: rank %d got sample %d, not of the epoch", trial, rank, x)
						}
						seen[x]++
						union = append(union, x)
					}
				}
			}
			if !last && len(union) != int(r.Samples()) {
				t.Fatalf("trial %d: a full round of %d samples dealt %d", trial, r.Samples(), len(union))
			}
		}
		for rank := range world {
			if steps[rank] != steps[0] || samples[rank] != samples[0] {
				t.Fatalf("trial %d (n %d, world %d, batch %d, drop %v): ranks took %v steps and %v samples", trial, n, world, batch, dropLast, steps, samples)
			}
		}
		missed, repeats := 0, 0
		for x := range inEpoch {
			if seen[x] == 0 {
				missed++
			}
			repeats += max(seen[x]-1, 0)
		}
		switch {
		case dropLast && (repeats != 0 || missed >= world || missed != n%world):
			t.Fatalf("trial %d (n %d, world %d): dropLast missed %d, repeated %d", trial, n, world, missed, repeats)
		case !dropLast && (missed != 0 || repeats >= world || repeats != (world-n%world)%world):
			t.Fatalf("trial %d (n %d, world %d): padding missed %d, repeated %d", trial, n, world, missed, repeats)
		}
		if want := (n + world - 1) / world; !dropLast && samples[0] != want {
			t.Fatalf("trial %d: %d samples a rank, DistributedSampler gives %d", trial, samples[0], want)
		}
		if want := n / world; dropLast && samples[0] != want {
			t.Fatalf("trial %d: %d samples a rank with drop_last, DistributedSampler gives %d", trial, samples[0], want)
		}
	}
}

// The ranks of a round take consecutive runs of it, rank 0 first: the
// global batch is the round, in the stream's order.
func TestShareIsTheRoundInRankOrder(t *testing.T) {
	r := Batch{Start: 10, End: 22, Picks: []Span{{10, 13}, {15, 16}, {18, 22}}}
	var got []uint64
	for rank := range 2 {
		sh, ok := Share(r, rank, 2, 4, false, false)
		if !ok {
			t.Fatal("nothing dealt")
		}
		for _, sp := range sh.Picks {
			for x := sp.From; x < sp.To; x++ {
				got = append(got, x)
			}
		}
	}
	if want := []uint64{10, 11, 12, 15, 18, 19, 20, 21}; !slices.Equal(got, want) {
		t.Fatalf("ranks took %v, want %v", got, want)
	}
}
