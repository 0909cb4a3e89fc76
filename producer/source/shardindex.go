package source

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/tsock/tsock/producer/source/internal/wds"
)

// A shard index file keeps what indexing the shards learnt (each shard's
// samples: key, offset, size, label; what it left out; and the version
// and size of the shard it came from), so that a later mount, on this
// node or any that sees the file, reads no shard to learn it again: a
// tar's headers lie between its members, so indexing reads every byte,
// and without the file the first epoch reads the shards twice. It plays
// the part of MosaicML Streaming's index.json, but tsock writes it
// itself, from the index it built.
//
// The file is trusted only for shards whose version (a local shard's
// inode, size and mtime; an object's ETag, from one HEAD) is the one it
// was written from: any other, or a different list of shards, and the
// shards are indexed again and the file rewritten. Every read also
// carries the indexed version (If-Match), as without the file.
//
// Layout, little-endian, every count and length a uvarint: the magic; the
// number of shards; per shard its name, version, size, its samples (key,
// offset, size, label each), its skips (key, why, rows each), where it broke
// off ("" if it did not), a Parquet file's footer ("" for a tar; a
// Parquet sample's offset is its row) and the rows it left out whole,
// and why; then the CRC-32 (IEEE) of all
// before it. Version 1 had no footers, version 2 no skip's rows (a
// Parquet run of rows left out for one reason): such a file is indexed
// again.
const indexMagic = "tsock shard index 3\n"

// indexFamily begins every version's magic: a file that begins with it
// is tsock's own, of this version or an older (indexed again and
// rewritten), never another's (refused).
const indexFamily = "tsock shard index "

// maxIndexFile bounds an index file read: ImageNet's is some 45 MB, and
// a file past this is refused at its size, before a byte is read.
const maxIndexFile = 1 << 30

// encodeIndex is the index file of shards names, indexed as ixs.
func encodeIndex(names []string, ixs []shardIndex) []byte {
	var b bytes.Buffer
	writeIndex(&b, names, ixs) // a bytes.Buffer's writes do not fail
	return b.Bytes()
}

// writeIndex writes the index file of shards names, indexed as ixs, to
// w as it goes: a footer of 60 MB costs the file its bytes, not copies
// of them in memory.
func writeIndex(w io.Writer, names []string, ixs []shardIndex) error {
	sum := crc32.NewIEEE()
	bw := bufio.NewWriter(io.MultiWriter(w, sum))
	var scratch [binary.MaxVarintLen64]byte
	num := func(n int64) { bw.Write(binary.AppendUvarint(scratch[:0], uint64(n))) }
	raw := func(s []byte) { num(int64(len(s))); bw.Write(s) }
	str := func(s string) { num(int64(len(s))); bw.WriteString(s) }
	bw.WriteString(indexMagic)
	num(int64(len(names)))
	for k, name := range names {
		ix := ixs[k]
		str(name)
		str(ix.version)
		num(ix.size)
		num(int64(len(ix.samples)))
		for _, smp := range ix.samples {
			str(smp.Key)
			num(smp.Offset)
			num(smp.Size)
			num(int64(smp.Label))
		}
		num(int64(len(ix.skips)))
		for _, sk := range ix.skips {
			str(sk.Key)
			str(sk.Why)
			num(sk.Rows)
		}
		broke := ""
		if ix.broke != nil {
			broke = ix.broke.Error()
		}
		str(broke)
		raw(ix.footer)
		num(ix.lost)
		str(ix.lostWhy)
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	_, err := w.Write(binary.LittleEndian.AppendUint32(nil, sum.Sum32()))
	return err
}

// errIndexFile: an index file that is not one, or is damaged.
var errIndexFile = errors.New("not a tsock shard index")

// decodeIndex parses an index file. Any byte sequence is either an index
// whose every count fits the bytes that hold it, or an error: nothing is
// allocated beyond what the data could describe.
func decodeIndex(data []byte) (names []string, ixs []shardIndex, err error) {
	if len(data) < len(indexMagic)+4 || string(data[:len(indexMagic)]) != indexMagic {
		return nil, nil, fmt.Errorf("%w: no header", errIndexFile)
	}
	body, sum := data[:len(data)-4], binary.LittleEndian.Uint32(data[len(data)-4:])
	if crc32.ChecksumIEEE(body) != sum {
		return nil, nil, fmt.Errorf("%w: checksum mismatch (damaged or cut short)", errIndexFile)
	}
	d := indexDecoder{b: body[len(indexMagic):]}
	n := d.count(2) // a shard takes at least 2 bytes
	for k := 0; k < n && d.err == nil; k++ {
		name, version := d.str(), d.str()
		ix := shardIndex{version: version, size: d.num(math.MaxInt64)}
		samples := d.count(4)
		ix.samples = make([]wds.Sample, 0, samples)
		for range samples {
			key := d.str()
			// Labels bounded as indexing bounds them: a label sizes the
			// class list.
			smp := wds.Sample{Key: key, Offset: d.num(ix.size), Size: d.num(ix.size), Label: int(d.num(wds.MaxLabel - 1))}
			if smp.Size > ix.size-smp.Offset {
				d.fail("shard %q: a sample past the shard's %d bytes", name, ix.size)
			}
			ix.samples = append(ix.samples, smp)
		}
		for range d.count(2) {
			ix.skips = append(ix.skips, wds.Skip{Key: d.str(), Why: d.str(), Rows: d.num(maxGroupRows)})
		}
		if broke := d.str(); broke != "" {
			ix.broke = errors.New(broke)
		}
		if footer := d.raw(); len(footer) > 0 {
			ix.footer = footer // a slice of the file's bytes: parsed, then dropped
		}
		ix.lost, ix.lostWhy = d.num(math.MaxInt32), d.str()
		names, ixs = append(names, name), append(ixs, ix)
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d bytes after the last shard", len(d.b))
	}
	if d.err != nil {
		return nil, nil, d.err
	}
	return names, ixs, nil
}

// indexDecoder reads an index file's fields, remembering the first
// error (every later read is then empty).
type indexDecoder struct {
	b   []byte
	err error
}

func (d *indexDecoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", errIndexFile, fmt.Sprintf(format, args...))
	}
	d.b = nil
}

// num is a uvarint no larger than most.
func (d *indexDecoder) num(most int64) int64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 || v > uint64(most) {
		d.fail("a number out of range")
		return 0
	}
	d.b = d.b[n:]
	return int64(v)
}

// count is a number of items of at least size bytes each: no more than
// the bytes left could hold.
func (d *indexDecoder) count(size int) int {
	return int(d.num(int64(len(d.b) / size)))
}

// raw is a length-prefixed field as a slice of the data, not copied.
func (d *indexDecoder) raw() []byte {
	n := d.num(int64(len(d.b)))
	if d.err != nil || int64(len(d.b)) < n {
		d.fail("a string past the end")
		return nil
	}
	b := d.b[:n:n]
	d.b = d.b[n:]
	return b
}

func (d *indexDecoder) str() string {
	n := d.num(int64(len(d.b)))
	if d.err != nil || int64(len(d.b)) < n {
		d.fail("a string past the end")
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// loadIndex is the index of shards names from the file at path, if the
// file is an index of exactly these shards, each still the version it
// was indexed from; else nil, saying why on the log. A shard whose
// version cannot be learnt (gone, access denied) is an error: indexing it
// again would fail the same way, after a misleading word on the log.
func loadIndex(ctx context.Context, path string, names []string, files shardFiles) ([]shardIndex, error) {
	data, err := readIndexFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	stale := func(why string, args ...any) ([]shardIndex, error) {
		slog.Info("shard index file not used: the shards are indexed again and it is rewritten", append([]any{"file", path, "why", why}, args...)...)
		return nil, nil
	}
	if errors.Is(err, errIndexRefused) {
		return nil, err // not ours, or not trusted: neither read nor rewritten
	}
	if err != nil {
		return stale(err.Error()) // unreadable: the write will say why too
	}
	have, ixs, err := decodeIndex(data)
	if err != nil {
		return stale(err.Error())
	}
	if len(have) != len(names) {
		return stale("it indexes other shards", "its_shards", len(have), "shards", len(names))
	}
	for k := range names {
		if have[k] != names[k] {
			return stale("it indexes other shards", "its", have[k], "shard", names[k])
		}
	}
	changed, errs := make([]bool, len(names)), make([]error, len(names))
	inParallel(len(names), files.parallel(), func(k int) {
		version, size, err := files.version(ctx, names[k])
		errs[k], changed[k] = err, err == nil && (version != ixs[k].version || size != ixs[k].size)
	})
	if err := firstError(errs); err != nil {
		return nil, err
	}
	for k := range changed {
		if changed[k] {
			return stale("a shard is not the one indexed", "shard", names[k], "reason", "changed since it was indexed")
		}
	}
	return ixs, nil
}

// firstError is the first of errs that is not nil.
func firstError(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// errIndexRefused: a file at the index path that tsock neither reads nor
// overwrites (not an index of its own, or not trusted).
var errIndexRefused = errors.New("neither read nor overwritten")

// The trust model. An index file says which bytes of which shard are a
// sample and what its label is: whoever can write it chooses what every
// trial trains on. So a file is read only where nobody but the mount's
// user (or root) could have written it: owned by that user or root, not
// writable by group or others, in a directory that is likewise owned and
// not writable by others (or sticky, as /tmp is, where others cannot
// replace it). Anything else at the path (another user's file, a link, a
// FIFO, a user's own file that is not an index of tsock's) is refused
// with the reason: the shards are indexed in memory, and the file is left
// as it is, never overwritten.

// readIndexFile reads the index file at path, refusing (errIndexRefused)
// anything the trust model does not allow, anything but a regular file
// that starts as an index does, and a file over maxIndexFile bytes, each
// before its body is read.
func readIndexFile(path string) ([]byte, error) {
	f, size, err := openIndexFile(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data := make([]byte, size)
	if _, err := f.ReadAt(data, 0); err != nil {
		return nil, err
	}
	return data, nil
}

// openIndexFile opens the index file at path and says its size, having
// checked all readIndexFile checks but the body. Every check is made on
// what was opened (fstat of the descriptor), never on the path again: a
// file checked by name and then opened by name could be another's, put
// there between the two (another user linking and unlinking a crafted
// index in a shared sticky directory). The directory is opened first
// and checked the same way, and the file opened in it without following
// a link.
func openIndexFile(path string) (*os.File, int64, error) {
	dir := filepath.Dir(path)
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, 0, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(dfd)
	var dst unix.Stat_t
	if err := unix.Fstat(dfd, &dst); err != nil {
		return nil, 0, &os.PathError{Op: "stat", Path: dir, Err: err}
	}
	if why := untrusted(&dst, true); why != "" {
		return nil, 0, fmt.Errorf("index file %s: not trusted: its directory %s %s: %w", path, dir, why, errIndexRefused)
	}
	fd, err := unix.Openat(dfd, filepath.Base(path), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ELOOP):
		return nil, 0, fmt.Errorf("index file %s: not a regular file (a link): %w", path, errIndexRefused)
	case err != nil:
		return nil, 0, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		f.Close()
		return nil, 0, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		err = fmt.Errorf("index file %s: not a regular file (%s): %w", path, fileType(st.Mode), errIndexRefused)
	} else if why := untrusted(&st, false); why != "" {
		err = fmt.Errorf("index file %s: not trusted: %s: %w", path, why, errIndexRefused)
	} else if st.Size > maxIndexFile {
		err = fmt.Errorf("index file %s: %d bytes, over the %d-byte limit: %w", path, st.Size, maxIndexFile, errIndexRefused)
	}
	head := make([]byte, len(indexFamily))
	if err == nil {
		if n, _ := f.ReadAt(head, 0); string(head[:n]) != indexFamily {
			err = fmt.Errorf("index file %s: not a tsock shard index: %w", path, errIndexRefused)
		}
	}
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, st.Size, nil
}

// fileType names a file's type from its mode, for messages.
func fileType(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFIFO:
		return "a FIFO"
	case unix.S_IFDIR:
		return "a directory"
	case unix.S_IFCHR, unix.S_IFBLK:
		return "a device"
	case unix.S_IFSOCK:
		return "a socket"
	case unix.S_IFLNK:
		return "a link"
	}
	return "not a plain file"
}

// untrusted says why st (a directory if dir) could have been written by
// another user than this process's or root, "" if it could not.
func untrusted(st *unix.Stat_t, dir bool) string {
	if me := uint32(os.Geteuid()); st.Uid != me && st.Uid != 0 {
		return fmt.Sprintf("is owned by uid %d, not by this user (uid %d) or root", st.Uid, me)
	}
	if st.Mode&0o022 != 0 && !(dir && st.Mode&unix.S_ISVTX != 0) {
		return fmt.Sprintf("is writable by others (mode %#o)", st.Mode&0o777)
	}
	return ""
}

// saveIndex writes the index file atomically: to a temporary file beside
// path, renamed over it, so that a mount reading it meanwhile, or a
// crash, never sees half a file. Its directory is made where missing (the
// default one, in the user's cache directory, is not there at first).
func saveIndex(path string, names []string, ixs []shardIndex) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	// What is there must be an index of tsock's that we may rewrite: a
	// user's own file at the path, or another's, is never replaced.
	if f, _, err := openIndexFile(path); err == nil {
		f.Close()
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after the rename, a name no longer there
	if err := writeIndex(tmp, names, ixs); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
