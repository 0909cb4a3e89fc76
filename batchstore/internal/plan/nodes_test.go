package plan

import (
	"math/rand/v2"
	"testing"
)

// Over any data, node count, world and batch size, with and without
// dropLast: every node cuts the same runs from the same order (every
// sample of the data in exactly one, counts ⌊T/n⌋ or ⌈T/n⌉, each a
// stretch of the order); each node deals NodeDeal a fresh order of its
// run (NodePad's sample added, or its run's last left out: NodeSamples)
// in rounds of its ranks' batches (Share), and then every rank of every node
// takes the same steps and the same samples, and the counts dealt are
// DistributedSampler's over all the ranks: every sample at least once
// and W·⌈T/W⌉ in all, or with dropLast none twice and W·⌊T/W⌋ in all.
func TestNodesDealEqualStepsAsDistributedSamplerCounts(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 3))
	for trial := range 3000 {
		size := 1 + rng.IntN(300)
		order := rng.Perm(size) // the node order: the dataset in some order
		in := make([]bool, size)
		total := 0
		for i := range in {
			if in[i] = rng.IntN(4) > 0 || i == 0; in[i] {
				total++
			}
		}
		has := func(i int) bool { return in[i] }
		nodes, world, batch := 1+rng.IntN(5), 1+rng.IntN(4), 1+rng.IntN(6)
		dropLast := rng.IntN(2) == 0
		ranks := nodes * world
		if dropLast && total < ranks {
			continue // nothing to deal: DistributedSampler gives every rank nothing too
		}
		deal := NodeDeal(total, nodes, dropLast)
		seen := map[int]int{}
		owner := map[int]int{}
		steps, samples := -1, -1
		dealt := 0
		for k := range nodes {
			from, to := NodeRun(order, has, k, nodes)
			var run []int
			for p := from; p < to; p++ {
				if has(order[p]) {
					run = append(run, order[p])
					if o, dup := owner[order[p]]; dup {
						t.Fatalf("trial %d: sample %d in the runs of nodes %d and %d", trial, order[p], o, k)
					}
					owner[order[p]] = k
				}
			}
			if len(run) != total/nodes && len(run) != (total+nodes-1)/nodes {
				t.Fatalf("trial %d: node %d of %d holds %d of %d", trial, k, nodes, len(run), total)
			}
			if pad, ok := NodePad(order, has, k, nodes); ok && !has(pad) {
				t.Fatalf("trial %d: node %d pads with %d, not in the data", trial, k, pad)
			}
			mine := NodeSamples(order, has, k, nodes, dropLast)
			if len(mine) != deal {
				t.Fatalf("trial %d: node %d makes %d of a run of %d, every node deals %d", trial, k, len(mine), len(run), deal)
			}
			for _, x := range mine[:min(len(mine), len(run))] {
				if owner[x] != k {
					t.Fatalf("trial %d: node %d makes %d of node %d's run", trial, k, x, owner[x])
				}
			}
			run = mine
			// A fresh order of the run: its samples as global samples
			// 0..len-1 of this node's stream, cut into rounds.
			rng.Shuffle(len(run), func(i, j int) { run[i], run[j] = run[j], run[i] })
			rounds := roundsOf(0, len(run), world, batch, false)
			for r := range world {
				nSteps, nSamples := 0, 0
				for i, round := range rounds {
					last := i == len(rounds)-1
					share, ok := Share(round, r, world, batch, last, dropLast)
					if !ok {
						continue
					}
					nSteps++
					for _, sp := range share.Spans() {
						for x := sp.From; x < sp.To; x++ {
							seen[run[x]]++
							nSamples++
							dealt++
						}
					}
				}
				if steps == -1 {
					steps, samples = nSteps, nSamples
				}
				if nSteps != steps || nSamples != samples {
					t.Fatalf("trial %d (%d of %d samples, %d nodes × %d ranks, batch %d, dropLast %v): node %d rank %d takes %d steps of %d samples, another %d of %d",
						trial, total, size, nodes, world, batch, dropLast, k, r, nSteps, nSamples, steps, samples)
				}
			}
		}
		if len(owner) != total {
			t.Fatalf("trial %d: the runs hold %d of %d samples", trial, len(owner), total)
		}
		want := ranks * ((total + ranks - 1) / ranks)
		if dropLast {
			want = ranks * (total / ranks)
		}
		if dealt != want {
			t.Fatalf("trial %d (%d samples, %d nodes × %d ranks, dropLast %v): %d dealt, DistributedSampler deals %d", trial, total, nodes, world, dropLast, dealt, want)
		}
		for i := range size {
			switch {
			case !in[i] && seen[i] > 0:
				t.Fatalf("trial %d: sample %d dealt, not in the data", trial, i)
			case in[i] && !dropLast && seen[i] == 0:
				t.Fatalf("trial %d: sample %d never dealt (padding)", trial, i)
			case dropLast && seen[i] > 1:
				t.Fatalf("trial %d: sample %d dealt %d times (dropLast)", trial, i, seen[i])
			}
		}
	}
}
