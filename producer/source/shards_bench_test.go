package source_test

import (
	"archive/tar"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/tsock/tsock/producer/producertest"
)

// writeShards writes shards train-NNNNNN.tar of per samples each into
// dir: img as KEY.jpg, and KEY.cls.
func writeShards(b *testing.B, dir string, shards, per int, img []byte) {
	b.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	for s := range shards {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("train-%06d.tar", s)))
		if err != nil {
			b.Fatal(err)
		}
		w := tar.NewWriter(f)
		for i := range per {
			for _, m := range []struct {
				ext  string
				data []byte
			}{{"jpg", img}, {"cls", []byte("7\n")}} {
				w.WriteHeader(&tar.Header{Name: fmt.Sprintf("%08d.%s", s*per+i, m.ext), Mode: 0o644, Size: int64(len(m.data))})
				w.Write(m.data)
			}
		}
		w.Close()
		f.Close()
	}
}

// BenchmarkOpenShards indexes 1,000 shards of 100 samples each (KEY.jpg
// of 1 KiB and KEY.cls), from the page cache: the cost of a mount's
// index of an ImageNet-sized shard count, per sample.
func BenchmarkOpenShards(b *testing.B) {
	dir := b.TempDir()
	writeShards(b, dir, 1000, 100, make([]byte, 1024))
	b.ResetTimer()
	for b.Loop() {
		src := producertest.OpenShards(b, filepath.Join(dir, "train-{000000..000999}.tar"))
		if src.Len() != 100000 {
			b.Fatalf("%d samples, want 100000", src.Len())
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/100000, "ns/sample")
}
