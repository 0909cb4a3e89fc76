package fs

import (
	"sync"
)

// forgetter tells the kernel to drop the names of batches a consumer has
// released, so that it forgets their inodes and go-fuse frees them. With
// zero entry timeouts the kernel would otherwise keep every name it ever
// looked up until memory pressure or the consumer's rmdir: the daemon
// grew by about 0.9 KiB per batch read in a run-forever test.
//
// Telling the kernel (NotifyEntry) takes the directory's lock, which a
// lookup blocked in the store holds: it runs on its own goroutine, never
// inside a request, and Mounted.Unmount stops it after the store has let
// blocked lookups go.
type forgetter struct {
	fs      *fileSystem
	mu      sync.Mutex
	pending []forgetEntry
	wake    chan struct{} // one token: something is pending
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
}

type forgetEntry struct {
	consumer string
	local    uint64
}

func newForgetter(fs *fileSystem) *forgetter {
	f := &forgetter{fs: fs, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go f.run()
	return f
}

// add queues consumer's batch local; it never blocks (it runs in Release).
func (f *forgetter) add(consumer string, local uint64) {
	f.mu.Lock()
	f.pending = append(f.pending, forgetEntry{consumer, local})
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

func (f *forgetter) run() {
	defer close(f.done)
	for {
		select {
		case <-f.stop:
			return
		case <-f.wake:
		}
		f.mu.Lock()
		batch := f.pending
		f.pending = nil
		f.mu.Unlock()
		consumers := f.fs.root.GetChild("consumers")
		for _, e := range batch {
			dir := consumers.GetChild(e.consumer)
			if dir == nil {
				continue // it left: rmdir dropped every name
			}
			// ENOENT (the kernel had no such name) is fine.
			dir.NotifyEntry(BatchName(e.local))
			if f.fs.opts.CUDA != nil {
				dir.NotifyEntry(CUDAName(e.local))
			}
		}
	}
}

// close stops the goroutine and waits for it.
func (f *forgetter) close() {
	f.once.Do(func() { close(f.stop) })
	<-f.done
}
