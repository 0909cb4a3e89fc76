package batchfile_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tsock/tsock/batchstore/batchfile"
)

// ragged is a 3-sample batch: labels, and tokens of lengths 2, 0, 3.
func ragged(t *testing.T, first int64) []byte {
	t.Helper()
	data, err := batchfile.Build(map[string]string{"who": "test"}, []batchfile.TensorData{
		{Name: "labels", Dtype: "I64", Shape: []int64{3}, Data: batchfile.Int64s(first, first+1, first+2)},
		{Name: "tokens", Dtype: "I32", Shape: []int64{5, 2}, Data: bytes.Repeat([]byte{byte(first)}, 40)},
		{Name: "tokens.offsets", Dtype: "I64", Shape: []int64{4}, Data: batchfile.Int64s(0, 2, 2, 5)},
	}, 8)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestParseRagged(t *testing.T) {
	h, err := batchfile.ParseBytes(ragged(t, 10))
	if err != nil {
		t.Fatal(err)
	}
	if h.Samples != 3 || h.Meta["who"] != "test" || len(h.Tensors) != 3 {
		t.Fatalf("header %+v", h)
	}
	if got := h.Ragged["tokens"]; len(got) != 4 || got[3] != 5 {
		t.Fatalf("offsets %v", got)
	}
}

// unchecked is a file of labels of shape and bytes as given beside a
// 3-sample tensor, built without Parse's checks.
func unchecked(t *testing.T, shape []int64, labels []byte) []byte {
	h := &batchfile.Header{Tensors: []batchfile.Tensor{
		{Name: "labels", Dtype: "I64", Shape: shape, Begin: 0, End: int64(len(labels))},
		{Name: "x", Dtype: "U8", Shape: []int64{3}, Begin: int64(len(labels)), End: int64(len(labels)) + 3},
	}}
	return append(append(h.Encode(8), labels...), 1, 2, 3)
}

// TestBadBatchesAreRefused: every way a file can be wrong gives ErrInvalid
// with a message naming the problem.
func TestBadBatchesAreRefused(t *testing.T) {
	good := ragged(t, 0)
	n := binary.LittleEndian.Uint64(good)
	js := string(good[8 : 8+n])
	withJSON := func(s string) []byte {
		out := binary.LittleEndian.AppendUint64(nil, uint64(len(s)))
		return append(append(out, s...), good[8+n:]...)
	}
	cases := map[string]struct {
		data []byte
		want string
	}{
		"empty":            {nil, "too short"},
		"huge header len":  {binary.LittleEndian.AppendUint64(nil, 1<<40), "header length"},
		"not json":         {withJSON(strings.Repeat("x", len(js))), "not a JSON object"},
		"truncated":        {good[:len(good)-1], "bytes of data"},
		"trailing bytes":   {append(append([]byte(nil), good...), 0), "bytes of data"},
		"bad dtype":        {withJSON(strings.Replace(js, `"I32"`, `"Q32"`, 1)), "dtype"},
		"dims disagree":    {unchecked(t, []int64{4}, batchfile.Int64s(1, 2, 3, 4)), "samples"},
		"offsets past end": {withJSON(strings.Replace(js, `[0,24]`, `[0,99]`, 1)), "bytes"},
		"duplicate":        {withJSON(strings.Replace(js, `"tokens.offsets"`, `"labels"`, 1)), "twice"},
		"unknown field":    {withJSON(strings.Replace(js, `"dtype":"I64"`, `"dtyp":"I64","dtype":"I64"`, 1)), "unknown field"},
		"scalar":           {withJSON(strings.Replace(js, `"shape":[3]`, `"shape":[]`, 1)), "scalar"},
		"meta not strings": {withJSON(strings.Replace(js, `"who":"test"`, `"who":1`, 1)), "__metadata__"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := batchfile.ParseBytes(c.data)
			if !errors.Is(err, batchfile.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want ErrInvalid saying %q", err, c.want)
			}
		})
	}
	// Offsets that decrease, or do not end at the ragged tensor's length.
	for name, off := range map[string][]byte{"decreasing": batchfile.Int64s(0, 3, 2, 5), "short": batchfile.Int64s(0, 2, 2, 4), "negative start": batchfile.Int64s(-1, 2, 2, 5)} {
		bad := append([]byte(nil), good...)
		copy(bad[len(bad)-32:], off)
		if _, err := batchfile.ParseBytes(bad); !errors.Is(err, batchfile.ErrInvalid) || !strings.Contains(err.Error(), "offsets") {
			t.Errorf("%s offsets: got %v", name, err)
		}
	}
}

// TestCutMatchesAnOracle cuts random runs of random ragged batches and
// compares each sample with the source's.
func TestCutMatchesAnOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	type sample struct {
		label  int64
		tokens []byte
	}
	var batches [][]sample
	var parts []batchfile.Part
	for b := 0; b < 5; b++ {
		n := 1 + rng.IntN(6)
		var labels, offs []int64
		var toks []byte
		offs = append(offs, 0)
		var ss []sample
		for i := 0; i < n; i++ {
			l := rng.IntN(4)
			tk := make([]byte, 4*l)
			for k := range tk {
				tk[k] = byte(rng.IntN(256))
			}
			labels = append(labels, int64(100*b+i))
			toks = append(toks, tk...)
			offs = append(offs, offs[len(offs)-1]+int64(l))
			ss = append(ss, sample{int64(100*b + i), tk})
		}
		data, err := batchfile.Build(nil, []batchfile.TensorData{
			{Name: "labels", Dtype: "I64", Shape: []int64{int64(n)}, Data: batchfile.Int64s(labels...)},
			{Name: "tokens", Dtype: "F32", Shape: []int64{offs[n]}, Data: toks},
			{Name: "tokens.offsets", Dtype: "I64", Shape: []int64{int64(n + 1)}, Data: batchfile.Int64s(offs...)},
		}, batchfile.PageSize)
		if err != nil {
			t.Fatal(err)
		}
		h, err := batchfile.ParseBytes(data)
		if err != nil {
			t.Fatal(err)
		}
		batches = append(batches, ss)
		parts = append(parts, batchfile.Part{Header: h, Data: bytes.NewReader(data), From: 0, To: n})
	}
	for trial := 0; trial < 200; trial++ {
		var cut []batchfile.Part
		var want []sample
		for i, p := range parts {
			if rng.IntN(2) == 0 {
				continue
			}
			from := rng.IntN(p.To)
			to := from + 1 + rng.IntN(p.To-from)
			cut = append(cut, batchfile.Part{Header: p.Header, Data: p.Data, From: from, To: to})
			want = append(want, batches[i][from:to]...)
		}
		if len(cut) == 0 {
			continue
		}
		c, err := batchfile.Cut(cut, map[string]string{"epoch": "7"})
		if err != nil {
			t.Fatal(err)
		}
		data, err := c.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		h, err := batchfile.ParseBytes(data)
		if err != nil {
			t.Fatalf("cut does not parse: %v", err)
		}
		if h.Samples != len(want) || h.Meta["epoch"] != "7" || h.DataStart%batchfile.PageSize != 0 {
			t.Fatalf("cut header %+v, want %d samples", h, len(want))
		}
		lab, tok, off := h.Tensor("labels"), h.Tensor("tokens"), h.Ragged["tokens"]
		for i, s := range want {
			got := int64(binary.LittleEndian.Uint64(data[h.DataStart+lab.Begin+8*int64(i):]))
			toks := data[h.DataStart+tok.Begin+4*off[i] : h.DataStart+tok.Begin+4*off[i+1]]
			if got != s.label || !bytes.Equal(toks, s.tokens) {
				t.Fatalf("trial %d sample %d: label %d tokens %v, want %d %v", trial, i, got, toks, s.label, s.tokens)
			}
		}
	}
}

// FuzzParse: no byte sequence panics Parse, and whatever it accepts cuts
// into a file that parses back with the same samples.
func FuzzParse(f *testing.F) {
	seed := func(first int64) []byte {
		data, _ := batchfile.Build(map[string]string{"epoch": "0"}, []batchfile.TensorData{
			{Name: "labels", Dtype: "I64", Shape: []int64{2}, Data: batchfile.Int64s(first, first+1)},
			{Name: "x", Dtype: "U8", Shape: []int64{3}, Data: []byte{1, 2, 3}},
			{Name: "x.offsets", Dtype: "I64", Shape: []int64{3}, Data: batchfile.Int64s(0, 1, 3)},
		}, 8)
		return data
	}
	f.Add(seed(0))
	f.Add(seed(5)[:40])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := batchfile.ParseBytes(data)
		if err != nil {
			if !errors.Is(err, batchfile.ErrInvalid) {
				t.Fatalf("error not marked invalid: %v", err)
			}
			return
		}
		if h.Size() != int64(len(data)) {
			t.Fatalf("size %d of a %d-byte file", h.Size(), len(data))
		}
		c, err := batchfile.Cut([]batchfile.Part{{Header: h, Data: bytes.NewReader(data), From: 0, To: h.Samples}}, h.Meta)
		if err != nil {
			t.Fatal(err)
		}
		out, err := c.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		h2, err := batchfile.ParseBytes(out)
		if err != nil || h2.Samples != h.Samples || !bytes.Equal(out[h2.DataStart:], data[h.DataStart:]) {
			t.Fatalf("whole cut differs: %v", err)
		}
	})
}
