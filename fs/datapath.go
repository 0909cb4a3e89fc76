package fs

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// The data path: how a batch's bytes reach a reader, gathered here (the
// filler, which reads batches ahead, is fill.go; the forgetter, which has
// the kernel drop released batches, forget.go). Its invariants:
//
//   - With root on Linux 6.9+, opens are served by FUSE passthrough from
//     the batch's memory-backed file (probePassthrough registers a file
//     once at mount, as go-fuse would otherwise turn passthrough off
//     silently at the first open): reads and mappings never enter the
//     daemon, and the kernel's readahead is raised to requestSize for the
//     opens it will not pass through.
//   - Otherwise (a user's mount) the daemon serves reads with
//     FOPEN_KEEP_CACHE: one page cache per batch inode, shared by every
//     consumer; the filler reads each batch ahead whole once a consumer
//     looks it up, in requests of the kernel's readahead window (raised to
//     the splice limit where the sysfs file is writable).
//   - A reply from a producer batch is spliced from its file, up to what
//     a pipe holds (spliceLimit: spliceMax, less where pipe-max-size is
//     under 1 MiB); every other reply is one writev (bytesReply), never a
//     pipe go-fuse would fill in vain. The first failed splice turns
//     splicing off for the mount, said once (spliceFailed, fuseLog); only
//     replies spliced are counted so.
//   - Nothing on the data path blocks: a Read answers from the blob the
//     lease pins, and the lease outlives every read of its open.
//   - Status says which path serves, and what it served (DataPath,
//     SharedPath, IngestPath, Served): counted here, nowhere else.

// requestSize is the largest read or write the kernel sends (its cap is
// 1 MiB).
const requestSize = 1 << 20

// spliceMax is the largest reply spliced from a batch's file, and the
// readahead window asked for when the daemon serves reads, so that every
// read-ahead reply is spliced: a reply, header and all, must fit in a pipe
// (go-fuse grows one to the reply and a page, rounded up to a power of
// two; a user may grow a pipe to pipe-max-size, 1 MiB by default), and
// 1 MiB replies failed.
const spliceMax = 512 << 10

// spliceLimit is the largest reply this machine's pipes let the daemon
// splice: spliceMax, less where pipe-max-size is under 1 MiB, none where
// it cannot be read.
func spliceLimit() int64 {
	pipeMax, err := readNumber("/proc/sys/fs/pipe-max-size")
	if err != nil {
		return 0
	}
	return min(spliceMax, pipeMax/2)
}

// readNumber reads a kernel file that holds one integer.
func readNumber(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// dataPath is how batch reads are served, and what was seen of it.
type dataPath struct {
	wanted      bool   // passthrough asked for and probed fine
	window      int64  // without passthrough: the kernel's readahead window
	spliceMax   int64  // the largest reply spliced from a batch's file
	reason      string // why passthrough is off, if it is
	backing     string // the blobs' storage
	daemonReads atomic.Uint64
	daemonBytes atomic.Uint64
	// Of those, the bytes spliced from the batch's file.
	splicedBytes atomic.Uint64
	// spliceOff: a splice failed, and replies are copied from then on;
	// spliceWhy says why (go-fuse's words, noted by fuseLog) and since
	// when, once.
	spliceOff  atomic.Bool
	spliceOnce sync.Once
	spliceMu   sync.Mutex
	spliceErr  string // the last splice error go-fuse reported
	spliceWhy  string
	// Re-batched files (a consumer's own batch size or stitched epochs)
	// are assembled by the daemon from several producer batches.
	rebatchedBytes atomic.Uint64
	// directAsked counts the answers of DirectXattr: readers that learned
	// where a batch lies, to read it around FUSE.
	directAsked atomic.Uint64
	// Writes into ingest/ that came to the daemon (passthrough off).
	daemonWrites atomic.Uint64
}

func (p *dataPath) passthrough() bool { return p.wanted }

// spliceFailed turns splicing off for the mount at its first failure,
// and says so once: the replies are copied from then on (correct, one
// more copy each), where go-fuse would try and fail again for each.
func (p *dataPath) spliceFailed() {
	p.spliceOnce.Do(func() {
		p.spliceMu.Lock()
		why := p.spliceErr
		if why == "" {
			why = "a splice failed"
		}
		p.spliceWhy = fmt.Sprintf("since %s: %s", time.Now().Format(time.TimeOnly), why)
		p.spliceMu.Unlock()
		p.spliceOff.Store(true)
		slog.Warn("splicing replies failed: replies are copied from now on (reads stay correct; the daemon copies each byte once more)", "why", why)
	})
}

// spliceNote keeps go-fuse's word for a failed splice, which comes just
// before its fallback to Bytes.
func (p *dataPath) spliceNote(err string) {
	p.spliceMu.Lock()
	defer p.spliceMu.Unlock()
	p.spliceErr = err
}

// spliceState says why splicing is off ("" while it is on).
func (p *dataPath) spliceState() string {
	if !p.spliceOff.Load() {
		return ""
	}
	p.spliceMu.Lock()
	defer p.spliceMu.Unlock()
	return p.spliceWhy
}

// fuseLog takes go-fuse's log lines into slog. A failed splice is
// noted, not logged: the data path says it once as it falls back
// (spliceFailed), where go-fuse would log a line for every reply.
type fuseLog struct{ path *dataPath }

func (l fuseLog) Write(b []byte) (int, error) {
	line := strings.TrimSpace(string(b))
	if why, ok := strings.CutPrefix(line, "trySplice: "); ok {
		l.path.spliceNote(why)
		return len(b), nil
	}
	slog.Warn("fuse: " + line)
	return len(b), nil
}

// splicedReply is a reply go-fuse splices from a batch's file (it
// splices what says where it lies: Seekable), or, where the splice
// fails (a pipe it cannot grow: a user's pipe quota full, pipe-max-size
// lowered), copies with Bytes. It counts what was spliced once the reply
// is written (Done), and a failed splice turns splicing off for the
// mount (dataPath.spliceFailed): go-fuse would otherwise try, fail and
// log again for every reply. go-fuse calls it from one goroutine.
type splicedReply struct {
	fd       uintptr
	off      int64
	size     int
	path     *dataPath
	tried    bool // go-fuse asked where the bytes lie: a pipe was grown for them
	fellBack bool // and copied them instead
}

func (r *splicedReply) Size() int { return r.size }

func (r *splicedReply) Seekable() (fd uintptr, off int64, sz int) {
	r.tried = true
	return r.fd, r.off, r.size
}

func (r *splicedReply) Bytes(buf []byte) ([]byte, fuse.Status) {
	r.fellBack = true
	r.path.spliceFailed()
	n, err := syscall.Pread(int(r.fd), buf[:min(len(buf), r.size)], r.off)
	if err != nil {
		return nil, fuse.ToStatus(err)
	}
	return buf[:n], fuse.OK
}

func (r *splicedReply) Done() {
	if r.tried && !r.fellBack {
		r.path.splicedBytes.Add(uint64(r.size))
	}
}

// bytesReply answers a read with bytes the daemon holds, in one writev: a
// reply go-fuse cannot splice from a file it would first try to (a pipe
// taken, grown and written) before writing it.
func bytesReply(b []byte) fuse.ReadResult { return fuse.ReadResultVector([][]byte{b}) }

// probePassthrough registers a backing file once: the kernel accepts it
// only with CAP_SYS_ADMIN on Linux ≥ 6.9 with passthrough negotiated.
// go-fuse would otherwise turn passthrough off silently at the first open.
func (m *Mounted) probePassthrough(opts Options) (bool, string) {
	if !opts.Passthrough {
		return false, "off by request"
	}
	id, errno := m.server.RegisterBackingFd(&fuse.BackingMap{Fd: int32(opts.ProbeFd)})
	if errno != 0 {
		return false, fmt.Sprintf("kernel refused a backing file: %v (needs root and Linux 6.9+)", errno)
	}
	m.server.UnregisterBackingFd(id)
	return true, ""
}

// DataPath says how batch reads are served right now.
func (m *Mounted) DataPath() string {
	return m.SharedPath() + fmt.Sprintf("; re-batched files (a consumer's own batch size or epochs not aligned with the producer's) are assembled by the daemon: %s read so far",
		humanize.IBytes(m.fs.path.rebatchedBytes.Load()))
}

// SharedPath says how the producer's own batch files are served.
func (m *Mounted) SharedPath() string {
	p := m.fs.path
	if p.wanted {
		if n := p.daemonReads.Load(); n > 0 {
			return fmt.Sprintf("passthrough from %s, but %d reads (%d bytes) came to the daemon: the kernel refused some opens",
				p.backing, n, p.daemonBytes.Load())
		}
		return fmt.Sprintf("passthrough from %s (reads and mmaps never enter the daemon)", p.backing)
	}
	filled, failed := m.fs.fill.counts()
	notFilled := ""
	if failed > 0 {
		notFilled = fmt.Sprintf(" (%d could not be: their readers read them themselves)", failed)
	}
	spliced := ""
	if why := p.spliceState(); why != "" {
		spliced = ", splicing off " + why + ": replies copied"
	}
	return fmt.Sprintf("daemon reads from %s (each batch read ahead whole once a consumer looks it up, in %s requests served in parallel, into the page cache its consumers share: %d batches%s, %s served so far, %s of it spliced%s); passthrough off: %s; around FUSE: %d opens learned where their batch lies (%s), for their readers to map it from the daemon's file",
		p.backing, humanize.IBytes(uint64(p.window)), filled, notFilled, humanize.IBytes(p.daemonBytes.Load()),
		humanize.IBytes(p.splicedBytes.Load()), spliced, p.reason, p.directAsked.Load(), DirectXattr)
}

// IngestPath says how writes into ingest/ are served: always by the
// daemon, which bounds each batch by the buffer as it is written and
// refuses writes once its writer's close has ruled on it.
func (m *Mounted) IngestPath() string {
	p := m.fs.path
	return fmt.Sprintf("daemon writes into %s (%d so far): each write is charged to the buffer as it comes, and none lands after the writer's close",
		p.backing, p.daemonWrites.Load())
}

// Passthrough reports whether opens are served by passthrough.
func (m *Mounted) Passthrough() bool { return m.fs.path.wanted && m.fs.path.daemonReads.Load() == 0 }

// Served is what the daemon has served of producer batches: reads and
// bytes (none with passthrough).
func (m *Mounted) Served() (reads, bytes uint64) {
	return m.fs.path.daemonReads.Load(), m.fs.path.daemonBytes.Load()
}

// readahead raises the mount's readahead window to want bytes (go-fuse
// can only lower it, through MaxReadAhead) and returns the window in
// force: want, or, where the raise is refused (a user's mount: the sysfs
// file is root's), the kernel's own, kernelWindow if it cannot be read.
func readahead(dir string, want int64) (int64, error) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return kernelWindow, err
	}
	path := fmt.Sprintf("/sys/class/bdi/%d:%d/read_ahead_kb", unix.Major(st.Dev), unix.Minor(st.Dev))
	err := os.WriteFile(path, []byte(fmt.Sprintf("%d\n", want>>10)), 0)
	if err == nil {
		return want, nil
	}
	if kb, rerr := readNumber(path); rerr == nil && kb > 0 {
		return kb << 10, err
	}
	return kernelWindow, err
}

// kernelWindow is the kernel's default readahead window, a user's mount's.
const kernelWindow = 128 << 10
