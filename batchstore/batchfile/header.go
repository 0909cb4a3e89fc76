package batchfile

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"sort"
	"strconv"
	"strings"
)

// MaxHeader bounds a header's JSON: a batch has a few tensors, and a
// bigger header is a broken or hostile file.
const MaxHeader = 1 << 20

// PageSize is the alignment of the data in the files tsock writes.
const PageSize = 4096

// OffsetsSuffix names a ragged tensor's companion: x.offsets for x.
const OffsetsSuffix = ".offsets"

// Dtypes maps each accepted safetensors dtype to its element size.
var Dtypes = map[string]int64{
	"F64": 8, "F32": 4, "F16": 2, "BF16": 2,
	"I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1,
}

// ErrInvalid marks every error that says a file is not a valid batch.
var ErrInvalid = errors.New("not a valid batch")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// Tensor is one tensor of a batch.
type Tensor struct {
	Name  string
	Dtype string
	Shape []int64
	// Begin and End are byte offsets relative to the data start.
	Begin, End int64
}

// rowBytes is the size of one index of the first dimension.
func (t *Tensor) rowBytes() int64 {
	n := Dtypes[t.Dtype]
	for _, d := range t.Shape[1:] {
		n *= d
	}
	return n
}

// Header is a parsed batch file.
type Header struct {
	Meta    map[string]string
	Tensors []Tensor // in data order
	// DataStart is where the data begins: 8 + the JSON's length.
	DataStart int64
	Samples   int
	// Ragged holds each ragged tensor's offsets (B+1 values), by the
	// ragged tensor's name; they are read from the file by Parse.
	Ragged map[string][]int64
}

// Size is the file's length.
func (h *Header) Size() int64 {
	if len(h.Tensors) == 0 {
		return h.DataStart
	}
	return h.DataStart + h.Tensors[len(h.Tensors)-1].End
}

// Tensor returns the named tensor, or nil.
func (h *Header) Tensor(name string) *Tensor {
	for i := range h.Tensors {
		if h.Tensors[i].Name == name {
			return &h.Tensors[i]
		}
	}
	return nil
}

// isOffsets: t is the companion of a ragged tensor of h.
func (h *Header) isOffsets(name string) bool {
	base, ok := strings.CutSuffix(name, OffsetsSuffix)
	_, ragged := h.Ragged[base]
	return ok && ragged
}

// rows is where samples [from, to) of t lie, as rows of its first dimension.
func (h *Header) rows(t *Tensor, from, to int) (int64, int64) {
	if off, ok := h.Ragged[t.Name]; ok {
		return off[from], off[to]
	}
	return int64(from), int64(to)
}

// Parse reads and checks the batch file of size bytes that r holds.
func Parse(r io.ReaderAt, size int64) (*Header, error) {
	if size < 8 {
		return nil, invalid("%d bytes: too short for a safetensors header", size)
	}
	var lenBuf [8]byte
	if _, err := r.ReadAt(lenBuf[:], 0); err != nil {
		return nil, fmt.Errorf("read header length: %w", err)
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	if n < 2 || n > MaxHeader || n > uint64(size-8) {
		return nil, invalid("header length %d: more than the %d-byte file or the %d-byte limit", n, size, MaxHeader)
	}
	js := make([]byte, n)
	if _, err := r.ReadAt(js, 8); err != nil {
		return nil, fmt.Errorf("read header: %w", err)
	}
	h, err := parseJSON(js)
	if err != nil {
		return nil, err
	}
	h.DataStart = 8 + int64(n)
	if err := h.check(size - h.DataStart); err != nil {
		return nil, err
	}
	if err := h.readOffsets(r); err != nil {
		return nil, err
	}
	return h, nil
}

// ParseBytes parses a batch file held in memory.
func ParseBytes(data []byte) (*Header, error) {
	return Parse(bytes.NewReader(data), int64(len(data)))
}

type tensorJSON struct {
	Dtype   string   `json:"dtype"`
	Shape   []int64  `json:"shape"`
	Offsets []uint64 `json:"data_offsets"`
}

// parseJSON decodes the header object strictly: no duplicate names, no
// unknown fields, metadata of strings only.
func parseJSON(js []byte) (*Header, error) {
	if len(bytes.TrimSpace(js)) == 0 || bytes.TrimSpace(js)[0] != '{' {
		return nil, invalid("header is not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	if _, err := dec.Token(); err != nil {
		return nil, invalid("header: %v", err)
	}
	h := &Header{Meta: map[string]string{}}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, invalid("header: %v", err)
		}
		name, _ := tok.(string)
		if seen[name] {
			return nil, invalid("header names %q twice", name)
		}
		seen[name] = true
		if name == "__metadata__" {
			if err := dec.Decode(&h.Meta); err != nil {
				return nil, invalid("__metadata__ must map names to strings: %v", err)
			}
			if h.Meta == nil { // "__metadata__": null
				h.Meta = map[string]string{}
			}
			continue
		}
		var tj tensorJSON
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, invalid("tensor %q: %v", name, err)
		}
		sub := json.NewDecoder(bytes.NewReader(raw))
		sub.DisallowUnknownFields()
		if err := sub.Decode(&tj); err != nil {
			return nil, invalid("tensor %q: %v", name, err)
		}
		if name == "" {
			return nil, invalid("a tensor has an empty name")
		}
		if len(tj.Offsets) != 2 || tj.Offsets[0] > tj.Offsets[1] || tj.Offsets[1] > math.MaxInt64 {
			return nil, invalid("tensor %q: data_offsets %v: want [begin, end] with begin <= end", name, tj.Offsets)
		}
		h.Tensors = append(h.Tensors, Tensor{Name: name, Dtype: tj.Dtype, Shape: tj.Shape,
			Begin: int64(tj.Offsets[0]), End: int64(tj.Offsets[1])})
	}
	if _, err := dec.Token(); err != nil {
		return nil, invalid("header: %v", err)
	}
	if dec.More() {
		return nil, invalid("header: bytes after the JSON object")
	}
	if rest, _ := io.ReadAll(dec.Buffered()); len(bytes.TrimSpace(rest)) > 0 {
		return nil, invalid("header: bytes after the JSON object")
	}
	return h, nil
}

// check verifies the tensors against a data section of dataLen bytes
// and finds the sample count.
func (h *Header) check(dataLen int64) error {
	if len(h.Tensors) == 0 {
		return invalid("no tensors")
	}
	sort.Slice(h.Tensors, func(i, j int) bool { return h.Tensors[i].Begin < h.Tensors[j].Begin })
	var at int64
	for i := range h.Tensors {
		t := &h.Tensors[i]
		size, ok := Dtypes[t.Dtype]
		if !ok {
			return invalid("tensor %q: dtype %q: want one of F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL", t.Name, t.Dtype)
		}
		if len(t.Shape) == 0 {
			return invalid("tensor %q: a scalar has no first (sample) dimension", t.Name)
		}
		bytes, ok := product(size, t.Shape)
		if !ok {
			return invalid("tensor %q: shape %v: negative or too large", t.Name, t.Shape)
		}
		if t.Begin != at {
			return invalid("tensor %q: data at %d..%d, but the previous tensor ends at %d (the data must have no holes or overlaps)", t.Name, t.Begin, t.End, at)
		}
		if t.End-t.Begin != bytes {
			return invalid("tensor %q: %d bytes of data for shape %v of %s (%d bytes)", t.Name, t.End-t.Begin, t.Shape, t.Dtype, bytes)
		}
		at = t.End
	}
	if at != dataLen {
		return invalid("tensors hold %d bytes but the file has %d bytes of data", at, dataLen)
	}
	return h.findSamples()
}

// product is size × the dims, or false if a dim is negative or it overflows.
func product(size int64, dims []int64) (int64, bool) {
	n := uint64(size)
	for _, d := range dims {
		if d < 0 {
			return 0, false
		}
		hi, lo := bits.Mul64(n, uint64(d))
		if hi != 0 || lo > math.MaxInt64 {
			return 0, false
		}
		n = lo
	}
	return int64(n), true
}

// findSamples sets Samples from the first dimensions and marks ragged
// tensors (offsets are read later).
func (h *Header) findSamples() error {
	h.Ragged = map[string][]int64{}
	names := map[string]bool{}
	for _, t := range h.Tensors {
		names[t.Name] = true
	}
	samples, from := int64(-1), ""
	agree := func(n int64, what string) error {
		if samples >= 0 && n != samples {
			return invalid("%s says %d samples but %s says %d (every tensor's first dimension is the batch's samples)", what, n, from, samples)
		}
		samples, from = n, what
		return nil
	}
	for _, t := range h.Tensors {
		if base, ok := strings.CutSuffix(t.Name, OffsetsSuffix); ok && names[base] {
			if t.Dtype != "I64" || len(t.Shape) != 1 || t.Shape[0] < 1 {
				return invalid("tensor %q: offsets of ragged %q must be I64 of shape [samples+1], not %s %v", t.Name, base, t.Dtype, t.Shape)
			}
			if err := agree(t.Shape[0]-1, fmt.Sprintf("%q (shape %v)", t.Name, t.Shape)); err != nil {
				return err
			}
			h.Ragged[base] = nil
		}
	}
	for _, t := range h.Tensors {
		if _, ragged := h.Ragged[t.Name]; ragged || h.isOffsets(t.Name) {
			continue
		}
		if err := agree(t.Shape[0], fmt.Sprintf("%q (shape %v)", t.Name, t.Shape)); err != nil {
			return err
		}
	}
	if samples < 1 || samples > math.MaxInt32 {
		return invalid("%d samples: a batch holds 1 to %d", samples, math.MaxInt32)
	}
	h.Samples = int(samples)
	return nil
}

// readOffsets reads and checks every ragged tensor's offsets.
func (h *Header) readOffsets(r io.ReaderAt) error {
	for base := range h.Ragged {
		t, x := h.Tensor(base+OffsetsSuffix), h.Tensor(base)
		buf := make([]byte, t.End-t.Begin)
		if _, err := r.ReadAt(buf, h.DataStart+t.Begin); err != nil {
			return fmt.Errorf("read %s: %w", t.Name, err)
		}
		off := make([]int64, len(buf)/8)
		for i := range off {
			off[i] = int64(binary.LittleEndian.Uint64(buf[8*i:]))
		}
		if off[0] != 0 || off[len(off)-1] != x.Shape[0] {
			return invalid("tensor %q: offsets run from %d to %d, want 0 to %d (the first dimension of %q)", t.Name, off[0], off[len(off)-1], x.Shape[0], base)
		}
		for i := 1; i < len(off); i++ {
			if off[i] < off[i-1] {
				return invalid("tensor %q: offsets decrease at sample %d (%d after %d)", t.Name, i-1, off[i], off[i-1])
			}
		}
		h.Ragged[base] = off
	}
	return nil
}

// Encode renders the 8-byte length and the JSON header, padded with
// spaces so that the data starts at a multiple of align. It sets
// h.DataStart.
func (h *Header) Encode(align int64) []byte { return h.EncodeAtLeast(align, 0) }

// EncodeAtLeast is Encode with the data starting at atLeast or later.
func (h *Header) EncodeAtLeast(align, atLeast int64) []byte {
	var b bytes.Buffer
	b.WriteString(`{"__metadata__":{`)
	keys := make([]string, 0, len(h.Meta))
	for k := range h.Meta {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		writeString(&b, k)
		b.WriteByte(':')
		writeString(&b, h.Meta[k])
	}
	b.WriteByte('}')
	for _, t := range h.Tensors {
		b.WriteByte(',')
		writeString(&b, t.Name)
		b.WriteString(`:{"dtype":`)
		writeString(&b, t.Dtype)
		b.WriteString(`,"shape":[`)
		for i, d := range t.Shape {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.FormatInt(d, 10))
		}
		fmt.Fprintf(&b, `],"data_offsets":[%d,%d]}`, t.Begin, t.End)
	}
	b.WriteByte('}')
	n := max(int64(b.Len()), atLeast-8)
	if align > 1 {
		n = (8+n+align-1)/align*align - 8
	}
	out := make([]byte, 8+n)
	binary.LittleEndian.PutUint64(out, uint64(n))
	copy(out[8:], b.Bytes())
	for i := 8 + b.Len(); i < len(out); i++ {
		out[i] = ' '
	}
	h.DataStart = 8 + n
	return out
}

func writeString(b *bytes.Buffer, s string) {
	js, _ := json.Marshal(s) // a string always marshals
	b.Write(js)
}
