package source

import (
	"errors"
	"reflect"
	"testing"

	"github.com/tsock/tsock/producer/source/internal/wds"
)

// FuzzShardIndex: any bytes given as an index file decode into an index
// whose every sample lies within its shard, that encodes back to itself,
// or into an error; never a panic, never an allocation beyond the input.
func FuzzShardIndex(f *testing.F) {
	f.Add(encodeIndex([]string{"a.tar", "b.tar"}, []shardIndex{
		{version: "1:2:3:4.5", size: 4096, samples: []wds.Sample{{Key: "x", Offset: 512, Size: 100, Label: 3}, {Key: "y", Offset: 1536, Size: 10, Label: 0}},
			skips: []wds.Skip{{Key: "z", Why: "no label"}}},
		{version: "etag", size: 1024, broke: errors.New("unexpected EOF")},
	}))
	f.Add(encodeIndex(nil, nil))
	f.Add([]byte(indexMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		names, ixs, err := decodeIndex(data)
		if err != nil {
			if !errors.Is(err, errIndexFile) {
				t.Fatalf("an error that is not errIndexFile: %v", err)
			}
			return
		}
		for k, ix := range ixs {
			for _, smp := range ix.samples {
				if smp.Offset < 0 || smp.Size < 0 || smp.Offset+smp.Size > ix.size || smp.Label < 0 {
					t.Fatalf("shard %q: a sample outside it: %+v of %d bytes", names[k], smp, ix.size)
				}
			}
		}
		again, ixs2, err := decodeIndex(encodeIndex(names, ixs))
		if err != nil || !reflect.DeepEqual(again, names) || len(ixs2) != len(ixs) {
			t.Fatalf("does not encode back: %v", err)
		}
		for k := range ixs {
			a, b := ixs[k], ixs2[k]
			if a.version != b.version || a.size != b.size || !reflect.DeepEqual(a.samples, b.samples) || !reflect.DeepEqual(a.skips, b.skips) || (a.broke == nil) != (b.broke == nil) {
				t.Fatalf("shard %d does not encode back: %+v, then %+v", k, a, b)
			}
		}
	})
}

// An index file's labels are bounded as indexing bounds them (a label
// sizes the class list: one of 50,000,000 cost 1.2 GiB).
func TestIndexFileLabelsAreBounded(t *testing.T) {
	file := func(label int) []byte {
		return encodeIndex([]string{"a.tar"}, []shardIndex{{version: "v", size: 4096, samples: []wds.Sample{{Key: "x", Offset: 512, Size: 100, Label: label}}}})
	}
	if _, _, err := decodeIndex(file(wds.MaxLabel - 1)); err != nil {
		t.Fatalf("the largest label indexing allows: %v", err)
	}
	if _, _, err := decodeIndex(file(50_000_000)); !errors.Is(err, errIndexFile) {
		t.Fatalf("a label of 50,000,000: %v, want the file refused", err)
	}
}
