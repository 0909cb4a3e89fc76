package producer

import (
	"sync"
	"sync/atomic"
)

// kept holds what a deterministic transform (--transform eval) made of
// each sample the first time, up to a limit: every later epoch copies
// those bytes instead of reading and decoding the file again, so a
// validation set served to every trial after every epoch is decoded once.
// A sample that does not fit is made as before, every time.
type kept struct {
	limit   int64
	mu      sync.RWMutex
	samples [][]byte // by dataset index; nil: not kept
	// versions: each kept sample's version (source.Versioned) when it
	// was made; a copy is served only while its file is still that one.
	versions []string
	used     int64
	count    int
	served   atomic.Uint64 // samples copied out instead of made
	refused  atomic.Uint64 // samples made but not kept: no room
}

func newKept(limit int64) *kept { return &kept{limit: limit} }

// get copies sample i's kept bytes into dst, if kept from the version
// the file has now.
func (k *kept) get(i int, version string, dst []byte) bool {
	k.mu.RLock()
	defer k.mu.RUnlock()
	if i >= len(k.samples) || k.samples[i] == nil || len(k.samples[i]) != len(dst) || k.versions[i] != version {
		return false
	}
	copy(dst, k.samples[i])
	k.served.Add(1)
	return true
}

// has says whether sample i is kept, from whatever version: its bytes
// are not read ahead (one whose file changed since is read when made).
// A nil kept (no --keep) has none.
func (k *kept) has(i int) bool {
	if k == nil {
		return false
	}
	k.mu.RLock()
	defer k.mu.RUnlock()
	return i < len(k.samples) && k.samples[i] != nil
}

// keep keeps a copy of sample i's made bytes (from version) if there is
// room; a copy of an older version is replaced.
func (k *kept) keep(i int, version string, made []byte) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if i < len(k.samples) && k.samples[i] != nil {
		if k.versions[i] == version {
			return
		}
		k.used -= int64(len(k.samples[i])) // its file changed: this making replaces it
		k.samples[i] = nil
		k.count--
	}
	if k.used+int64(len(made)) > k.limit {
		k.refused.Add(1)
		return
	}
	if i >= len(k.samples) {
		k.samples = append(k.samples, make([][]byte, i+1-len(k.samples))...)
		k.versions = append(k.versions, make([]string, i+1-len(k.versions))...)
	}
	k.versions[i] = version
	k.samples[i] = append([]byte(nil), made...)
	k.used += int64(len(made))
	k.count++
}

// KeptStats is what the kept samples hold and did.
type KeptStats struct {
	Limit, Used int64
	Samples     int    // samples kept
	Served      uint64 // samples copied out instead of decoded
	Refused     uint64 // samples made but not kept: no room
}

// Kept says what the kept samples hold; ok is false without --keep.
func (p *Producer) Kept() (s KeptStats, ok bool) {
	k := p.kept
	if k == nil {
		return KeptStats{}, false
	}
	k.mu.RLock()
	defer k.mu.RUnlock()
	return KeptStats{Limit: k.limit, Used: k.used, Samples: k.count, Served: k.served.Load(), Refused: k.refused.Load()}, true
}
