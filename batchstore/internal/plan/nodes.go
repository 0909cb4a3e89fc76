package plan

// Nodes: one tsock per node serving the ranks of trials that span n
// nodes (docs/ranks.md, "Across nodes"). Every node computes the same
// node order from the source and the seed (the dataset's pieces in a
// seeded order, each kept whole), numbers a consumer's data (its subset,
// or all) along it, and cuts it into n runs, node k's the k-th: a node
// reads its run's pieces, about 1/n of the bytes, and the cut is the
// same every epoch (each node deals a fresh order of its run to its
// ranks every epoch). Every node deals the same count an epoch
// (NodeDeal), so that all ranks of all nodes take the same steps: the
// counts dealt are DistributedSampler's, W·⌈T/W⌉ or, with drop_last,
// W·⌊T/W⌋ of T samples over W ranks.

// NodeRun is node k of n's run of the data has holds: the positions
// [from, to) of order whose samples (those has holds) are node k's. The
// data's T samples, numbered along order, are cut at ⌊i·T/n⌋: every
// sample of it is in exactly one node's run, and a run holds ⌊T/n⌋ or
// ⌈T/n⌉ of them.
func NodeRun(order []int, has func(int) bool, k, n int) (from, to int) {
	lo, hi := runBounds(count(order, has), k, n)
	return runAt(order, has, lo, hi)
}

// runAt is the positions [from, to) of order that hold the data's
// samples numbered [lo, hi) along it.
func runAt(order []int, has func(int) bool, lo, hi int) (from, to int) {
	from, to = len(order), len(order)
	seen := 0
	for p, x := range order {
		if !has(x) {
			continue
		}
		if seen == lo && from == len(order) {
			from = p
		}
		if seen == hi {
			to = p
			break
		}
		seen++
	}
	return min(from, to), to
}

// firstFrom is the first sample of the data at or after position p of
// order, wrapping round.
func firstFrom(order []int, has func(int) bool, p int) (int, bool) {
	for i := range order {
		if x := order[(p+i)%len(order)]; has(x) {
			return x, true
		}
	}
	return 0, false
}

// runBounds is node k of n's run of total samples, as their numbers
// [lo, hi) along the order.
func runBounds(total, k, n int) (lo, hi int) { return k * total / n, (k + 1) * total / n }

// count is how many samples of order has holds.
func count(order []int, has func(int) bool) int {
	total := 0
	for _, x := range order {
		if has(x) {
			total++
		}
	}
	return total
}

// NodeDeal is how many samples every node deals an epoch of data of
// total samples over n nodes: ⌊total/n⌋ with dropLast (a node whose run
// holds one more leaves its run's last out, NodeSamples), else
// ⌈total/n⌉ (a node whose run holds one fewer takes NodePad's sample
// too).
func NodeDeal(total, n int, dropLast bool) int {
	if dropLast {
		return total / n
	}
	return (total + n - 1) / n
}

// NodePad is the sample node k of n adds to its run without dropLast
// where the run holds one fewer than NodeDeal: the first sample of the
// data after its run in order (the next node's first, wrapping round),
// read by both nodes each epoch, as DistributedSampler repeats samples
// to even out its ranks. ok is false where the run needs none.
func NodePad(order []int, has func(int) bool, k, n int) (sample int, ok bool) {
	total := count(order, has)
	lo, hi := runBounds(total, k, n)
	if total == 0 || hi-lo >= NodeDeal(total, n, false) {
		return 0, false
	}
	_, to := runAt(order, has, lo, hi)
	return firstFrom(order, has, to)
}

// NodeSamples is what node k of n makes and deals of the data has
// holds, every epoch: its run, padded (NodePad) or, with dropLast, its
// run's last sample left out where it holds one more than NodeDeal, so
// that it holds NodeDeal samples exactly. With dropLast, the samples
// left out are the same every epoch, fewer than n of the data (each
// node's group still leaves its own uneven tail out of each epoch, a
// new one each time, as DistributedSampler does). The data is counted
// once and the order walked once (a consumer's subset is cut under the
// store's lock).
func NodeSamples(order []int, has func(int) bool, k, n int, dropLast bool) []int {
	total := count(order, has)
	lo, hi := runBounds(total, k, n)
	deal := NodeDeal(total, n, dropLast)
	from, to := runAt(order, has, lo, hi)
	run := make([]int, 0, deal)
	for _, x := range order[from:to] {
		if has(x) && len(run) < deal {
			run = append(run, x)
		}
	}
	if len(run) < deal {
		if pad, ok := firstFrom(order, has, to); ok {
			run = append(run, pad)
		}
	}
	return run
}
