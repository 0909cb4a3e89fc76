package plan

import "fmt"

// Admission: a subset is admitted only if every decided consumer's
// batch, under what all want together, spans no more producer batches
// than the buffer holds (it holds them all until the batch is read).

// Spans estimates how many producer batches (of producerBatch samples) a
// batch of size samples of a subset of subLen samples spans in a stream of
// wanted samples (subLen 0: everything, a batch spans its own size): two
// more for where its samples fall.
func Spans(size, subLen, wanted, producerBatch int) int64 {
	producerBatch = max(producerBatch, 1)
	if subLen == 0 {
		return int64(size)/int64(producerBatch) + 2
	}
	return int64(size)*int64(max(wanted, 1))/int64(subLen)/int64(producerBatch) + 2
}

// Want is a consumer's part in admission: its batch size and its
// subset, if it has one (Subset), of SubsetLen samples.
type Want struct {
	Name      string
	BatchSize int
	Subset    bool
	SubsetLen int
}

// Admit says why a consumer (joiner, with the subset it asks for) may not
// read it when wanted samples are wanted by all together and the buffer
// holds capacity producer batches of producerBatch samples (0: not known
// yet, so anything goes): its own batch, or a batch of another decided
// consumer with a subset (others), would span more than the buffer
// holds. nil: admitted.
func Admit(joiner Want, wanted int, others []Want, capacity int64, producerBatch int) error {
	if capacity == 0 {
		return nil
	}
	if n := Spans(joiner.BatchSize, joiner.SubsetLen, wanted, producerBatch); joiner.Subset && n > capacity {
		return fmt.Errorf("%d samples of the %d wanted: a batch of %d of them spans about %d producer batches, and the buffer holds %d (raise the buffer size, lower batch_size or widen the subset)",
			joiner.SubsetLen, wanted, joiner.BatchSize, n, capacity)
	}
	for _, o := range others {
		if !o.Subset {
			continue
		}
		if n := Spans(o.BatchSize, o.SubsetLen, wanted, producerBatch); n > capacity {
			return fmt.Errorf("%d samples wanted with it: a batch of %d of %s's %d would span about %d producer batches, and the buffer holds %d (raise the buffer size, or narrow this one's subset)",
				wanted, o.BatchSize, o.Name, o.SubsetLen, n, capacity)
		}
	}
	return nil
}
