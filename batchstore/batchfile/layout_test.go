package batchfile

import (
	"encoding/binary"
	"encoding/json"
	"testing"
)

func TestHeaderIsSafetensors(t *testing.T) {
	l := NewLayout(5, 7)
	_, hdr, err := l.Header(Meta{Epoch: 2, Index: 3, Seq: 9, ImageSize: 7, Layout: ChannelsLast, Transform: "train"})
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(hdr)
	if 8+n != DataStart || len(hdr) != DataStart {
		t.Fatalf("header length %d: data does not start at %d", n, DataStart)
	}
	var h map[string]json.RawMessage
	if err := json.Unmarshal(hdr[8:], &h); err != nil {
		t.Fatalf("header is not JSON: %v", err)
	}
	type tensor struct {
		Dtype   string `json:"dtype"`
		Shape   []int  `json:"shape"`
		Offsets [2]int `json:"data_offsets"`
	}
	var meta map[string]string
	json.Unmarshal(h["__metadata__"], &meta)
	if meta["epoch"] != "2" || meta["batch"] != "3" || meta["layout"] != "nhwc" {
		t.Fatalf("metadata %v", meta)
	}
	end := 0
	for _, name := range []string{"labels", "indices", "images"} {
		var tt tensor
		if err := json.Unmarshal(h[name], &tt); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if tt.Offsets[0] != end {
			t.Fatalf("%s starts at %d, want %d (contiguous)", name, tt.Offsets[0], end)
		}
		end = tt.Offsets[1]
	}
	if DataStart+end != l.Size {
		t.Fatalf("tensors end at %d, file is %d", DataStart+end, l.Size)
	}
	var img tensor
	json.Unmarshal(h["images"], &img)
	if img.Dtype != "U8" || len(img.Shape) != 4 || img.Shape[0] != 5 || img.Shape[3] != 3 {
		t.Fatalf("images tensor %+v", img)
	}
}
