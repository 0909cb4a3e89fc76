package plan

// Span is a run [From, To) of global samples: the stream of every
// sample the producer published, numbered from 0.
type Span struct{ From, To uint64 }

// Batch is one of a consumer's own batches: samples [Start, End), or,
// for a consumer with a subset, the runs of them in Picks.
type Batch struct {
	Start, End uint64
	Epoch      int    // the consumer's own epoch
	Index      int    // within that epoch
	Picks      []Span // nil: all of [Start, End)
}

// Samples is the number of samples in b.
func (b Batch) Samples() uint64 {
	if b.Picks == nil {
		return b.End - b.Start
	}
	n := uint64(0)
	for _, p := range b.Picks {
		n += p.To - p.From
	}
	return n
}

// Spans are b's runs of samples.
func (b Batch) Spans() []Span {
	if b.Picks == nil {
		return []Span{{b.Start, b.End}}
	}
	return b.Picks
}

// Resolved says what Next could tell of a consumer's batch.
type Resolved int

const (
	UnknownYet Resolved = iota // its samples or its epoch's end are not published yet
	Known                      // computed
	PastEnd                    // it would lie past the consumer's last epoch (or, from pick, its epoch holds none of its subset)
)
