package wds

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

// member is one tar member to write.
type member struct{ name, body string }

func shard(t testing.TB, members ...member) []byte {
	t.Helper()
	var b bytes.Buffer
	w := tar.NewWriter(&b)
	for _, m := range members {
		if err := w.WriteHeader(&tar.Header{Name: m.name, Mode: 0o644, Size: int64(len(m.body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, m.body)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestIndexGroupsMembersIntoSamples: consecutive members of one key are
// one sample, its image's bytes lie where the index says, its label
// comes from .cls (over .json), and groups without an image or a usable
// label are left out with the reason.
func TestIndexGroupsMembersIntoSamples(t *testing.T) {
	data := shard(t,
		member{"a/000.jpg", "JPEG-0"}, member{"a/000.cls", " 3\n"},
		member{"a/001.png", "PNG-1"}, member{"a/001.json", `{"label": 7, "w": 1}`},
		member{"a/002.cls", "1"}, member{"a/002.jpeg", "JPEG-2"}, member{"a/002.json", `{"label": 9}`},
		member{"a/003.jpg", "no label"},
		member{"a/004.cls", "4"},
		member{"a/005.jpg", "bad label"}, member{"a/005.cls", "four"},
		member{"a/006.jpg", "negative"}, member{"a/006.cls", "-1"},
		member{"b/007.PNG", "PNG-7"}, member{"b/007.CLS", "2"},
		member{"b/008.seg.png", "mask"}, member{"b/008.jpg", "JPEG-8"}, member{"b/008.cls", "5"},
		member{"b/009.seg.png", "mask only"}, member{"b/009.cls", "5"},
	)
	for _, seekable := range []bool{true, false} {
		var r io.Reader = bytes.NewReader(data)
		if !seekable {
			r = struct{ io.Reader }{r}
		}
		samples, skips, err := Index(r)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, s := range samples {
			got = append(got, fmt.Sprintf("%s=%s:%d", s.Key, data[s.Offset:s.Offset+s.Size], s.Label))
		}
		if want := "[a/000=JPEG-0:3 a/001=PNG-1:7 a/002=JPEG-2:1 b/007=PNG-7:2 b/008=JPEG-8:5]"; fmt.Sprint(got) != want {
			t.Fatalf("seekable %v: samples %v, want %s", seekable, got, want)
		}
		var why []string
		for _, s := range skips {
			why = append(why, s.Key+": "+s.Why)
		}
		for i, want := range []string{"a/003: no label", "a/004: no image member", `a/005: a/005.cls: not a whole number: "four"`, "a/006: a/006.cls: label -1", "b/009: no image member"} {
			if i >= len(why) || !strings.HasPrefix(why[i], want) {
				t.Fatalf("skips %q, want %q at %d", why, want, i)
			}
		}
	}
}

// TestIndexOfABrokenShardKeepsWhatCameBefore: a shard cut inside a
// member gives the samples before it, leaves the cut group out, and says
// where it broke.
func TestIndexOfABrokenShardKeepsWhatCameBefore(t *testing.T) {
	data := shard(t, member{"000.jpg", "first"}, member{"000.cls", "0"},
		member{"001.jpg", strings.Repeat("x", 2000)}, member{"001.cls", "1"})
	// Members take a 512-byte header and their data padded to 512 bytes:
	// 001.jpg's header is at 2048, its data at 2560.
	for cut, wantSkips := range map[int]int{2560 + 100: 1, 2048 + 100: 0} {
		samples, skips, err := Index(bytes.NewReader(data[:cut]))
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("cut at %d: error %v, want an unexpected EOF", cut, err)
		}
		if len(samples) != 1 || samples[0].Key != "000" || len(skips) != wantSkips || (wantSkips == 1 && skips[0].Key != "001") {
			t.Fatalf("cut at %d: samples %+v, skips %+v", cut, samples, skips)
		}
	}
}

// FuzzIndex: any byte stream indexes without a panic, and every sample's
// image lies inside the stream.
func FuzzIndex(f *testing.F) {
	f.Add(shard(f, member{"k.jpg", "img"}, member{"k.cls", "1"}))
	f.Add(shard(f, member{"k.png", "img"}, member{"k.json", `{"label":2}`}, member{"l.jpg", "x"}))
	f.Add([]byte("not a tar at all"))
	f.Fuzz(func(t *testing.T, data []byte) {
		samples, _, _ := Index(bytes.NewReader(data))
		for _, s := range samples {
			if s.Offset < 0 || s.Size < 0 || s.Offset+s.Size > int64(len(data)) || s.Label < 0 || s.Label >= MaxLabel {
				t.Fatalf("sample %+v outside a %d-byte stream", s, len(data))
			}
		}
	})
}

func TestExpand(t *testing.T) {
	for spec, want := range map[string]string{
		"s.tar":                  "[s.tar]",
		"s-{000..002}.tar":       "[s-000.tar s-001.tar s-002.tar]",
		"s-{8..10}.tar":          "[s-8.tar s-9.tar s-10.tar]",
		"s-{08..10}.tar":         "[s-08.tar s-09.tar s-10.tar]",
		"{a,b}/s-{0..1}.tar":     "[a/s-0.tar a/s-1.tar b/s-0.tar b/s-1.tar]",
		"/d/train-*.tar":         "[/d/train-*.tar]",
		"s-{000000..000001}.tar": "[s-000000.tar s-000001.tar]",
	} {
		got, err := Expand(spec)
		if err != nil || fmt.Sprint(got) != want {
			t.Errorf("Expand(%q) = %v, %v; want %s", spec, got, err, want)
		}
	}
	for _, bad := range []string{"s-{1..}.tar", "s-{2..1}.tar", "s-{0..9999999999}.tar", "s-{.tar", "s-}.tar", "{{a}}.tar",
		"{0..1023}{0..1023}{0..1023}.tar"} {
		if got, err := Expand(bad); err == nil {
			t.Errorf("Expand(%q) = %d names, want an error", bad, len(got))
		}
	}
}

// FuzzExpand: any spec expands without a panic to at most MaxShards
// names, or fails.
func FuzzExpand(f *testing.F) {
	for _, s := range []string{"s-{000..009}.tar", "{a,b}{c,d}.tar", "x{1..2}{..}", "{0..1048576}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		names, err := Expand(spec)
		if err == nil && (len(names) == 0 || len(names) > MaxShards) {
			t.Fatalf("%q: %d names", spec, len(names))
		}
	})
}
