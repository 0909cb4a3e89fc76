package plan

// BatchList is a consumer's own batches computed so far, from number
// base on. Those below its position go (all but the last computed, where
// the next starts), so a consumer that reads forever keeps only what it
// may still open.
type BatchList struct {
	base  uint64
	items []Batch
}

// Computed is the number of batches computed: those below it are known.
func (l *BatchList) Computed() uint64 { return l.base + uint64(len(l.items)) }

// Get is batch j, if computed and not dropped.
func (l *BatchList) Get(j uint64) (Batch, bool) {
	if j < l.base || j >= l.Computed() {
		return Batch{}, false
	}
	return l.items[j-l.base], true
}

// Last is the last batch computed.
func (l *BatchList) Last() (Batch, bool) {
	if len(l.items) == 0 {
		return Batch{}, false
	}
	return l.items[len(l.items)-1], true
}

// Add appends the next batch computed.
func (l *BatchList) Add(cb Batch) { l.items = append(l.items, cb) }

// DropBelow forgets the batches below j, keeping the last computed. It
// copies only once most of the slice is dead: amortized O(1) per batch.
func (l *BatchList) DropBelow(j uint64) {
	if len(l.items) == 0 {
		return
	}
	n := min(j, l.Computed()-1) - l.base
	if n < 64 || 2*n < uint64(len(l.items)) {
		return
	}
	l.items = append([]Batch(nil), l.items[n:]...)
	l.base += n
}

// Kept is how many batches the list holds now (computed and not
// dropped): what a consumer that reads forever keeps.
func (l *BatchList) Kept() int { return len(l.items) }
