package wds

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
)

// Sample is one sample of a shard.
type Sample struct {
	Key    string
	Offset int64 // of its image member's data in the shard
	Size   int64 // of that data
	Label  int
}

// Skip is a group of members left out, and why; or, for a Parquet file,
// a run of Rows rows (Key names the first and last) left out for one
// reason.
type Skip struct {
	Key, Why string
	Rows     int64 // the samples it stands for; 0 is one
}

// Samples is how many samples s stands for.
func (s Skip) Samples() int64 { return max(s.Rows, 1) }

// MaxLabelBytes bounds a label member (.cls, .json) read at index time.
const MaxLabelBytes = 64 << 10

// MaxLabel bounds a label: labels index the class list.
const MaxLabel = 1 << 20

// imageExts are the image members a sample may have, as ImageFolder's.
var imageExts = map[string]bool{
	"jpg": true, "jpeg": true, "png": true, "webp": true, "bmp": true,
	"gif": true, "tif": true, "tiff": true, "ppm": true, "pgm": true,
}

// Break is where and why a shard's index stopped early: At is the byte
// of the stream it had reached. A break is the shard's own (its bytes say
// so: ShardsOwn) or the stream's (a read that failed, a context ended),
// which says nothing of the shard.
type Break struct {
	At  int64
	Err error
}

func (b *Break) Error() string { return b.Err.Error() }
func (b *Break) Unwrap() error { return b.Err }

// ShardsOwn says whether the break err (from Index) is the shard's own
// fault, given its size: bytes that are not a tar, or a tar that ends
// before its last member does (a shard cut short, a half-copied file).
// Anything else is the stream's: a read error, a connection that broke,
// a cancelled run. Those must never make an index short.
func ShardsOwn(err error, size int64) bool {
	var b *Break
	if !errors.As(err, &b) {
		return false
	}
	if errors.Is(err, tar.ErrHeader) || errors.Is(err, tar.ErrFieldTooLong) || errors.Is(err, tar.ErrInsecurePath) {
		return true
	}
	return (errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)) && b.At >= size
}

// Index reads the tar stream r (a seeker is skipped over, not read) and
// returns its samples in member order, the groups it left out, and the
// error that stopped it early, if any (a *Break; the samples before it
// stand).
func Index(r io.Reader) ([]Sample, []Skip, error) {
	pr := &posReader{r: r}
	if s, ok := r.(io.Seeker); ok {
		pr.seeker = s
	}
	tr := tar.NewReader(pr)
	var ix indexer
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			// The stream broke in a header (the group so far is whole) or in
			// the data of the group's last member (it is not).
			if pr.pos >= ix.lastEnd {
				ix.flush()
			} else {
				ix.cutOff()
			}
			return ix.samples, ix.skips, &Break{At: pr.pos, Err: fmt.Errorf("tar header at byte %d: %w", pr.pos, err)}
		}
		if h.Typeflag != tar.TypeReg { // archive/tar reads the old TypeRegA as TypeReg
			continue
		}
		key, ext := splitName(h.Name)
		if key != ix.key || !ix.open {
			ix.flush()
			ix.start(key)
		}
		ix.lastEnd = pr.pos + h.Size
		switch {
		case imageExts[ext] && ix.size < 0:
			ix.offset, ix.size = pr.pos, h.Size
		case ext == "cls" || ext == "json":
			if err := ix.label(tr, ext, h.Size); err != nil {
				ix.cutOff()
				return ix.samples, ix.skips, &Break{At: pr.pos, Err: fmt.Errorf("member %q at byte %d: %w", printable(h.Name), pr.pos, err)}
			}
		}
	}
	ix.flush()
	return ix.samples, ix.skips, nil
}

// indexer groups consecutive members by key.
type indexer struct {
	samples []Sample
	skips   []Skip
	open    bool // a group has started
	key     string
	offset  int64
	size    int64 // -1: no image yet
	cls     int   // -1: none yet
	clsWhy  string
	fromCls bool  // the label came from .cls, which wins over .json
	lastEnd int64 // where the data of the group's last member ends
}

func (ix *indexer) start(key string) {
	*ix = indexer{samples: ix.samples, skips: ix.skips, open: true, key: key, size: -1, cls: -1}
}

// label reads a label member.
func (ix *indexer) label(r io.Reader, ext string, size int64) error {
	if ix.fromCls || (ext == "json" && ix.cls >= 0) {
		return nil
	}
	if size > MaxLabelBytes {
		ix.clsWhy = fmt.Sprintf("%s.%s is %d bytes, over %d", ix.key, ext, size, MaxLabelBytes)
		return nil
	}
	data := make([]byte, size)
	if _, err := io.ReadFull(r, data); err != nil {
		return err
	}
	n, err := parseLabel(ext, data)
	if err != nil {
		ix.clsWhy = fmt.Sprintf("%s.%s: %v", ix.key, ext, err)
		return nil
	}
	ix.cls, ix.fromCls, ix.clsWhy = n, ext == "cls", ""
	return nil
}

// parseLabel reads a .cls (a decimal integer) or a .json ({"label": N}).
func parseLabel(ext string, data []byte) (int, error) {
	var n int64
	if ext == "cls" {
		var err error
		if n, err = strconv.ParseInt(string(bytes.TrimSpace(data)), 10, 64); err != nil {
			return 0, fmt.Errorf("not a whole number: %q", printable(string(bytes.TrimSpace(data))))
		}
	} else {
		var doc struct {
			Label *int64 `json:"label"`
		}
		if err := json.Unmarshal(data, &doc); err != nil || doc.Label == nil {
			return 0, fmt.Errorf(`no integer "label" field`)
		}
		n = *doc.Label
	}
	if n < 0 || n >= MaxLabel {
		return 0, fmt.Errorf("label %d: must be 0 to %d", n, MaxLabel-1)
	}
	return int(n), nil
}

// flush ends the current group: a sample, or a skip saying what it lacks.
func (ix *indexer) flush() {
	if !ix.open {
		return
	}
	ix.open = false
	switch {
	case ix.size < 0:
		ix.skips = append(ix.skips, Skip{Key: ix.key, Why: "no image member (" + strings.Join(sortedExts(), " ") + ")"})
	case ix.cls < 0 && ix.clsWhy != "":
		ix.skips = append(ix.skips, Skip{Key: ix.key, Why: ix.clsWhy})
	case ix.cls < 0:
		ix.skips = append(ix.skips, Skip{Key: ix.key, Why: `no label: KEY.cls or KEY.json with "label"`})
	default:
		ix.samples = append(ix.samples, Sample{Key: ix.key, Offset: ix.offset, Size: ix.size, Label: ix.cls})
	}
}

// cutOff ends the current group where the stream broke: its members may
// lie past what can be read, so it is no sample.
func (ix *indexer) cutOff() {
	if ix.open {
		ix.open = false
		ix.skips = append(ix.skips, Skip{Key: ix.key, Why: "the shard breaks off inside it"})
	}
}

// splitName is WebDataset's key and extension of a member name.
func splitName(name string) (key, ext string) {
	dir, base := path.Split(name)
	if i := strings.IndexByte(base, '.'); i >= 0 {
		return dir + base[:i], strings.ToLower(base[i+1:])
	}
	return name, ""
}

func sortedExts() []string {
	return []string{"bmp", "gif", "jpeg", "jpg", "pgm", "png", "ppm", "tif", "tiff", "webp"}
}

// printable quotes what a shard says, so that no name can add a line to
// a status file.
func printable(s string) string {
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// posReader counts the stream position through reads and seeks, so that
// a member's data offset is where the reader stands after its header.
type posReader struct {
	r      io.Reader
	seeker io.Seeker // nil: skipping reads
	pos    int64
}

func (p *posReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.pos += int64(n)
	return n, err
}

// Seek lets tar skip member data without reading it. tar only asks for
// the current position and for relative moves.
func (p *posReader) Seek(off int64, whence int) (int64, error) {
	if p.seeker == nil {
		return 0, errors.New("not seekable")
	}
	n, err := p.seeker.Seek(off, whence)
	if err == nil {
		p.pos = n
	}
	return n, err
}
