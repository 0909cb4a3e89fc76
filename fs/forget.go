package fs

import (
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	fusefs "github.com/hanwen/go-fuse/v2/fs"

	"github.com/tsock/tsock/batchstore"
)

// forgetter asks the kernel to forget the inodes of batch files once they
// are released, so that go-fuse frees them too. With zero entry timeouts
// the kernel otherwise keeps every batch it ever looked up until memory
// pressure or the consumer's rmdir: the daemon grew by about 0.9 KiB per
// batch read in a run-forever test.
//
// It uses NOTIFY_PRUNE (FUSE 7.45, Linux 6.16+), which takes no directory
// lock. NotifyEntry, tried first, takes the directory's lock, which a
// lookup blocked in the store holds: every other lookup in that directory
// (status, state) then queued behind it, and a shutdown test hung. On an
// older kernel nothing is pruned and status shows the count growing.
// The goroutine is Mounted.Unmount's to stop.
//
// A producer batch's file is left while the store holds the batch (other
// consumers share its page cache): it is parked until the store, through
// its Invalidator port (Freed), says it freed the batch; nothing asks the
// store again. What is retried on a timer is the kernel's refusal only:
// it prunes no inode still in use, and says nothing when its use ends
// (a release can come while the closing file still holds its name).
type forgetter struct {
	root        *fusefs.Inode
	holds       func(seq uint64) bool // the store holds producer batch seq
	mu          sync.Mutex
	pending     []*readOnlyFile
	freed       []uint64      // batches the store freed, not yet looked at by run
	wake        chan struct{} // one token: something is pending
	stop        chan struct{}
	done        chan struct{}
	once        sync.Once
	unsupported atomic.Bool
}

func newForgetter(root *fusefs.Inode, holds func(seq uint64) bool) *forgetter {
	f := &forgetter{root: root, holds: holds, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go f.run()
	return f
}

var _ batchstore.Invalidator = (*forgetter)(nil)

// Freed implements batchstore.Invalidator: the store freed producer batch
// seq, and its parked files may be forgotten. It runs under the store's
// lock and never blocks.
func (f *forgetter) Freed(seq uint64) {
	if f.unsupported.Load() {
		return
	}
	f.mu.Lock()
	f.freed = append(f.freed, seq)
	f.mu.Unlock()
	f.poke()
}

// poke wakes run, where it sleeps.
func (f *forgetter) poke() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// add queues a released batch file's inode; it never blocks (it runs in
// Release).
func (f *forgetter) add(node *readOnlyFile) {
	if node == nil || f.unsupported.Load() {
		return
	}
	f.mu.Lock()
	f.pending = append(f.pending, node)
	f.mu.Unlock()
	f.poke()
}

// retries bounds how often one inode is asked for again: the kernel
// prunes only what nobody uses, and a release can arrive while the file
// being closed still holds its name.
const retries = 8

func (f *forgetter) run() {
	defer close(f.done)
	var again []*readOnlyFile              // asked for before, not forgotten yet
	parked := map[uint64][]*readOnlyFile{} // by batch: the store holds it
	tries := map[*readOnlyFile]int{}
	var inodes []*fusefs.Inode
	for {
		var retry <-chan time.Time
		if len(again) > 0 {
			retry = time.After(100 * time.Millisecond)
		}
		select {
		case <-f.stop:
			return
		case <-f.wake:
		case <-retry:
		}
		f.mu.Lock()
		nodes := append(again, f.pending...)
		freed := f.freed
		f.pending, f.freed = nil, nil
		f.mu.Unlock()
		// A batch freed after its file was parked: the event comes after
		// the park, in this goroutine, so none is missed; one freed before
		// its file came finds holds false below.
		for _, seq := range freed {
			nodes = append(nodes, parked[seq]...)
			delete(parked, seq)
		}
		again = again[:0:0]
		inodes = inodes[:0]
		var asked []*readOnlyFile
		seen := map[*readOnlyFile]bool{}
		for _, n := range nodes {
			if seen[n] {
				continue
			}
			seen[n] = true
			switch {
			case n.forgotten.Load():
				delete(tries, n)
			case n.batch && f.holds(n.seq):
				// Another consumer may still read its pages: asked for
				// once the store frees its batch.
				if !slices.Contains(parked[n.seq], n) {
					parked[n.seq] = append(parked[n.seq], n)
				}
			default:
				asked = append(asked, n)
				inodes = append(inodes, n.EmbeddedInode())
			}
		}
		if len(inodes) > 0 {
			if errno := f.root.NotifyPrune(inodes); errno == syscall.ENOSYS {
				f.unsupported.Store(true)
				return
			}
		}
		for _, n := range asked {
			if tries[n]++; !n.forgotten.Load() && tries[n] < retries {
				again = append(again, n)
			} else {
				delete(tries, n)
			}
		}
	}
}

// supported says whether the kernel can be asked to forget.
func (f *forgetter) supported() bool { return !f.unsupported.Load() }

// close stops the goroutine and waits for it.
func (f *forgetter) close() {
	f.once.Do(func() { close(f.stop) })
	<-f.done
}
