package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tsock/tsock/producer/producertest"
	"github.com/tsock/tsock/producer/source"
	"github.com/tsock/tsock/producer/source/remote/s3test"
)

// tailReads is how many requests reading the Parquet files' footers
// under dir takes: one for the last 64 KiB of each, a second where its
// footer is longer (parquet-go keeps the whole min and max of a binary
// column in it).
func tailReads(t *testing.T, dir string) uint64 {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(dir, "*.parquet"))
	var n uint64
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		n++
		if binary.LittleEndian.Uint32(data[len(data)-8:])+8 > 64<<10 {
			n++
		}
	}
	return n
}

// TestMountServesParquetFromS3: Parquet files as the Hub publishes them
// (class names in their metadata, several row groups, snappy and zstd,
// a column of other bytes beside), in a real S3 server on loopback,
// mount with no flag but --source: two exact epochs of every row with
// its label, the classes file names the classes as the dataset does, and
// status.json counts a request a row group for the image chunks' bytes
// alone (the other column is never read; the second epoch is --cache's).
// A second mount takes footers and labels from the index file: no GET
// at its open.
func TestMountServesParquetFromS3(t *testing.T) {
	server := s3test.Start(t, "data")
	folder := producertest.Folder(t, 24, 3)
	local := producertest.Parquet(t, folder, producertest.ParquetOptions{Files: 2, RowsPerGroup: 4, ExtraBytes: 20000})
	if err := os.CopyFS(filepath.Join(server.Root, "data", "hub"), os.DirFS(filepath.Dir(local))); err != nil {
		t.Fatal(err)
	}
	chunks, groups := producertest.ImageChunks(t, filepath.Dir(local))
	tails := tailReads(t, filepath.Dir(local))
	want, err := source.Open(context.Background(), folder, source.Options{})
	if err != nil {
		t.Fatal(err)
	}
	proxy := s3test.StartProxy(t, server, func(int) s3test.Fault { return s3test.Pass })
	index := filepath.Join(t.TempDir(), "hub.idx")
	spec := "s3://data/hub/train-{00000..00001}.parquet"
	for round := range 2 {
		d := startDaemon(t, "--source", spec, "--s3-endpoint", proxy.Endpoint, "--batch-size", "5", "--image-size", "8",
			"--epochs", "2", "--cache", "64MiB", "--shard-index", index)
		var doc statusDoc
		if got := readFile(t, filepath.Join(d.dir, "classes")); got != strings.Join(want.Classes(), "\n")+"\n" {
			t.Fatalf("classes %q, want the metadata's %q", got, want.Classes())
		}
		reader, out := consume(t, d, "c")
		if err := reader.Wait(); err != nil {
			t.Fatalf("consumer: %v", err)
		}
		batches, _ := readCopies(t, out)
		stream := producertest.Stream{Good: producertest.All(want.Len()), Label: want.Label, BatchSize: 5, Epochs: 2}
		if err := stream.Check(batches); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(readFile(t, filepath.Join(d.dir, "status.json"))), &doc); err != nil {
			t.Fatal(err)
		}
		// Requests: a HEAD a file at open, then (first mount) its tail
		// (tails) and a label chunk a row group; a GET a row group's image chunk
		// in the first epoch; a HEAD a file in the second, which checks
		// that the cache's bytes are still the files'. The second mount
		// reads footers and labels from the index file.
		requests := uint64(2 + groups + 2)
		if round == 0 {
			requests += tails + uint64(groups)
		}
		if doc.Remote == nil || doc.Remote.Requests != requests {
			t.Fatalf("mount %d: %+v, want %d requests:\n%s", round+1, doc.Remote, requests, strings.Join(proxy.Log(), "\n"))
		}
		if doc.Shards == nil || doc.Shards.Reads != int64(groups) || doc.Shards.ReadBytes != chunks || doc.Shards.LastEpochReads != int64(groups) || doc.Shards.LastEpochReadBytes != chunks || doc.Cache == nil || doc.Cache.Hits != uint64(want.Len()) {
			t.Fatalf("mount %d: shards %+v, cache %+v; want %d reads of the image chunks' %d bytes, the second epoch from the cache", round+1, doc.Shards, doc.Cache, groups, chunks)
		}
		if !strings.Contains(doc.Source, "(2 Parquet files)") {
			t.Fatalf("source %q", doc.Source)
		}
		d.stop(t)
	}
	// --columns is for Parquet; a bad one is a usage error.
	for _, args := range [][]string{{"--source", folder, "--columns", "image=img"}, {"--source", spec, "--columns", "img=x"}} {
		if code, out := runCLI(t, append([]string{"mount", t.TempDir()}, args...)...); code != exitUsage || !strings.Contains(out, "columns") {
			t.Errorf("%v: exit %d, %q; want a usage error naming --columns", args, code, out)
		}
	}
}
