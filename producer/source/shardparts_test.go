package source_test

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tsock/tsock/producer/producertest"
	"github.com/tsock/tsock/producer/source"
	"github.com/tsock/tsock/producer/source/remote/s3test"
)

// bigShards writes shards of per members of size random bytes each
// (KEY.jpg, never decoded here, and KEY.cls), class after class: shard k
// holds class k. It returns their spec and total bytes.
func bigShards(t *testing.T, shards, per, size int) (string, int64) {
	t.Helper()
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	var total int64
	for k := range shards {
		var b bytes.Buffer
		w := tar.NewWriter(&b)
		for m := range per {
			body := make([]byte, size)
			for i := range body {
				body[i] = byte(rng.Uint32())
			}
			key := fmt.Sprintf("s%02d-%03d", k, m)
			for _, f := range []struct {
				ext  string
				data []byte
			}{{".jpg", body}, {".cls", []byte(fmt.Sprint(k))}} {
				if err := w.WriteHeader(&tar.Header{Name: key + f.ext, Mode: 0o644, Size: int64(len(f.data)), Format: tar.FormatUSTAR}); err != nil {
					t.Fatal(err)
				}
				w.Write(f.data)
			}
		}
		w.Close()
		path := filepath.Join(dir, fmt.Sprintf("shard-%03d.tar", k))
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		total += int64(b.Len())
	}
	return filepath.Join(dir, fmt.Sprintf("shard-{000..%03d}.tar", shards-1)), total
}

// TestPartsOfShardsAreReadOncePerEpoch: shards of one class each, 20 MiB,
// in an object store, with a shard memory of one shard: whole shards
// cannot mix there, so they are read in parts of 8 MiB or more, held in
// the shard memory and on the shard disk. Each epoch reads every part
// once (a GET each: no more than one per 8 MiB, and the bytes of the
// shards; the second epoch less the parts it began with, still held), the
// samples are the shards' bytes exactly, and the shard disk holds what
// the memory does not, within its size.
func TestPartsOfShardsAreReadOncePerEpoch(t *testing.T) {
	const shards, per, size, batch = 4, 40, 512 << 10, 8
	local, total := bigShards(t, shards, per, size)
	server := s3test.Start(t, "data")
	spec := uploadShards(t, server, "data", local)
	proxy := s3test.StartProxy(t, server, func(int) s3test.Fault { return s3test.Pass })
	opened, err := source.Open(context.Background(), spec, source.Options{S3: s3Config(proxy.Endpoint)})
	if err != nil {
		t.Fatal(err)
	}
	sh := opened.(*source.Shards)
	if err := sh.Arrange(source.ShardSpace{Memory: total / shards, Disk: source.AutoDisk, DiskDir: producertest.DiskDir(t), Batch: batch}); err != nil {
		t.Fatal(err)
	}
	st := sh.Stats()
	if st.Pieces <= shards || int64(st.Pieces) > total/(8<<20) || st.Disk == 0 {
		t.Fatalf("%d pieces of %d shards (%d bytes), a shard disk of %d: want parts of 8 MiB or more, and the disk", st.Pieces, shards, total, st.Disk)
	}
	want := producertest.OpenShards(t, local)
	want.ShardMemory(0)
	rng := rand.New(rand.NewPCG(3, 4))
	order := producertest.All(sh.Len())
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	defer sh.Schedule(nil, nil)
	var got, exp []byte
	for epoch := range 2 {
		source.ShardShuffle(rng, order, sh.Piece, sh.Pieces(), sh.ShuffleWindow(), sh.PieceClass)
		before := sh.Stats().Reads
		atPlan := len(proxy.Log())
		sh.Schedule(order, nil)
		var onDisk int64 // the most seen on the shard disk
		for k, i := range order {
			if k%10 == 0 {
				_, _, _, now := sh.Held()
				onDisk = max(onDisk, now)
			}
			if got, err = sh.Encoded(context.Background(), i, &got); err != nil {
				t.Fatalf("epoch %d, sample %d: %v", epoch, i, err)
			}
			if exp, err = want.Encoded(context.Background(), i, &exp); err != nil || !bytes.Equal(got, exp) {
				t.Fatalf("epoch %d, sample %d: %d bytes, not the shard's %d (%v)", epoch, i, len(got), len(exp), err)
			}
		}
		st := sh.Stats()
		after, readBytes := st.Reads, st.ReadBytes
		gets := byMethod(proxy.Log()[atPlan:], " GET ")
		reads := after - before
		if int64(len(gets)) != reads || reads > int64(st.Pieces) || (epoch == 0 && (reads != int64(st.Pieces) || readBytes != total)) {
			t.Fatalf("epoch %d: %d GETs (%d pieces read, %d bytes in all), want a GET a piece of %d (%d bytes):\n%s",
				epoch, len(gets), reads, readBytes, st.Pieces, total, strings.Join(gets, "\n"))
		}
		if onDisk == 0 || onDisk > st.Disk {
			t.Fatalf("epoch %d: %d bytes on a shard disk of %d at most", epoch, onDisk, st.Disk)
		}
	}
}
