package producer

import (
	"context"
	"sync"

	"github.com/tsock/tsock/producer/source"
)

// fetcher reads samples' encoded bytes ahead of the workers, in the
// dispatcher's order, with a bounded number of requests in flight: a
// remote source's round trips then overlap instead of each worker
// waiting on its own. The run that starts it stops it (close) and waits
// for its goroutines.
type fetcher struct {
	src source.Source
	// whole says whether sample i is read from a piece of a shard read
	// whole (source.Sharded): those are not fetched one by one, since
	// the source reads their pieces ahead itself; a fetcher that did
	// would ask past what the shard memory holds, and read them alone.
	whole func(i int) bool
	// made says whether sample i is served without its bytes (kept: a
	// deterministic transform's copy): nothing to read ahead.
	made  func(i int) bool
	slots chan struct{} // one per sample asked ahead and not yet taken
	queue chan *fetched

	mu      sync.Mutex
	pending map[int][]*fetched // by dataset index, oldest first: an index may be asked again before it is taken
	wg      sync.WaitGroup
}

// fetched is one sample asked ahead: its bytes once done is closed.
type fetched struct {
	index int
	done  chan struct{}
	data  []byte
	err   error
}

// fetchWindow is how many samples per request in flight may wait,
// fetched, for their worker.
const fetchWindow = 4

// newFetcher starts parallel fetching goroutines over src; ctx ends
// their requests. made says which samples need no bytes now.
func newFetcher(ctx context.Context, src source.Source, parallel int, made func(i int) bool) *fetcher {
	f := &fetcher{
		src: src, slots: make(chan struct{}, fetchWindow*parallel), queue: make(chan *fetched),
		pending: map[int][]*fetched{}, whole: func(int) bool { return false }, made: made,
	}
	if sh, ok := source.As[source.Sharded](src); ok {
		f.whole = sh.ReadsWhole
	}
	for range parallel {
		f.wg.Go(func() {
			for fe := range f.queue {
				fe.data, fe.err = f.src.Encoded(ctx, fe.index, new([]byte)) // its own buffer: held until taken
				close(fe.done)
			}
		})
	}
	return f
}

// window is how far ahead of the workers the dispatcher may ask.
func (f *fetcher) window() int { return cap(f.slots) }

// ahead asks for sample i. It waits while the window is full of samples
// the workers have not taken yet, or until ctx ends.
func (f *fetcher) ahead(ctx context.Context, i int) error {
	if f.whole(i) || f.made(i) {
		return nil // its worker reads it from its piece, or needs no bytes
	}
	select {
	case f.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	fe := &fetched{index: i, done: make(chan struct{})}
	f.mu.Lock()
	f.pending[i] = append(f.pending[i], fe)
	f.mu.Unlock()
	select {
	case f.queue <- fe:
		return nil
	case <-ctx.Done():
		close(fe.done) // nobody fetches it: a worker that takes it reads now
		return ctx.Err()
	}
}

// Encoded is sample i's bytes: those asked ahead (waiting for them), or
// read now.
func (f *fetcher) Encoded(ctx context.Context, i int, scratch *[]byte) ([]byte, error) {
	f.mu.Lock()
	queue := f.pending[i]
	if len(queue) == 0 {
		f.mu.Unlock()
		return f.src.Encoded(ctx, i, scratch)
	}
	fe := queue[0]
	if len(queue) == 1 {
		delete(f.pending, i)
	} else {
		f.pending[i] = queue[1:]
	}
	f.mu.Unlock()
	<-fe.done
	<-f.slots
	if fe.err != nil || fe.data == nil {
		// Nothing read ahead is a sample's verdict: a fault met ahead
		// (an outage since passed, a read cut by a stop) is read again
		// now, under the store's whole budget of waiting.
		return f.src.Encoded(ctx, i, scratch)
	}
	return fe.data, nil
}

// drop gives back what was asked ahead for sample i that its worker will
// not take: it was served without its bytes (kept since it was asked, or
// its file is gone). A slot is freed only where a sample is taken or
// dropped: one never taken would hold the window, and the dispatcher,
// for good. A nil fetcher has nothing to give back.
func (f *fetcher) drop(i int) {
	if f == nil {
		return
	}
	f.mu.Lock()
	queue := f.pending[i]
	if len(queue) == 0 {
		f.mu.Unlock()
		return
	}
	if len(queue) == 1 {
		delete(f.pending, i)
	} else {
		f.pending[i] = queue[1:]
	}
	f.mu.Unlock()
	<-f.slots // its bytes, once read, are garbage
}

// close stops fetching once what was asked is done.
func (f *fetcher) close() {
	close(f.queue)
	f.wg.Wait()
}
