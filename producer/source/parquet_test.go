package source_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tsock/tsock/producer/producertest"
	"github.com/tsock/tsock/producer/source"
)

// epochOf reads every sample of src once, in order, as an epoch reads
// them: scheduled first where src reads pieces.
func epochOf(t *testing.T, src source.Source, order []int) [][]byte {
	t.Helper()
	if sh, ok := source.As[source.Sharded](src); ok {
		sh.Schedule(order, nil)
		defer sh.Schedule(nil, nil)
	}
	out := make([][]byte, src.Len())
	var scratch []byte
	for _, i := range order {
		b, err := src.Encoded(context.Background(), i, &scratch)
		if err != nil {
			t.Fatalf("sample %d (%s): %v", i, src.Name(i), err)
		}
		out[i] = bytes.Clone(b)
	}
	return out
}

// TestParquetServesTheHubLayout: Parquet files as the Hub writes them
// (an image struct of bytes and path, a nullable int64 label, class names
// in the "huggingface" metadata, several row groups, snappy and zstd)
// serve every image byte for byte, in the folder's order, with its label
// and the dataset's class names; an epoch reads each row group's image
// chunk once, a request each, and never a byte of another column.
func TestParquetServesTheHubLayout(t *testing.T) {
	dir := producertest.Folder(t, 36, 4)
	want, err := source.ScanFolder(dir)
	if err != nil {
		t.Fatal(err)
	}
	spec := producertest.Parquet(t, dir, producertest.ParquetOptions{Files: 3, RowsPerGroup: 5, ExtraBytes: 4096})
	src, err := source.Open(context.Background(), spec, source.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if src.Len() != want.Len() {
		t.Fatalf("%d samples, want %d", src.Len(), want.Len())
	}
	if got, w := strings.Join(src.Classes(), ","), strings.Join(want.Classes(), ","); got != w {
		t.Fatalf("classes %s, want the metadata's %s", got, w)
	}
	order := make([]int, src.Len())
	for i := range order {
		order[i] = len(order) - 1 - i
	}
	got := epochOf(t, src, order)
	for i := range got {
		img, err := os.ReadFile(want.Name(i))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[i], img) || src.Label(i) != want.Label(i) {
			t.Fatalf("sample %d (%s): %d bytes, label %d; want %s's %d bytes, label %d", i, src.Name(i), len(got[i]), src.Label(i), want.Name(i), len(img), want.Label(i))
		}
	}
	chunks, groups := producertest.ImageChunks(t, filepath.Dir(spec))
	st := src.(source.Sharded).Stats()
	if st.Reads != int64(groups) || st.ReadBytes != chunks || st.Pieces != groups || st.LastEpochReads != st.Reads || st.LastEpochReadBytes != st.ReadBytes {
		t.Fatalf("an epoch read %d pieces (%d bytes; the last epoch %d, %d bytes) of %d; want each of the %d row groups' image chunks once (%d bytes)",
			st.Reads, st.ReadBytes, st.LastEpochReads, st.LastEpochReadBytes, st.Pieces, groups, chunks)
	}
}

// TestClassSortedParquetMixesLikeAUniformShuffle: Parquet files written
// class after class (a file a class, as a class-sorted folder converts),
// row groups of 5: in a shard memory of two files, the shuffle over row
// groups (with the shard disk below) gives a batch at least 0.9 of the
// distinct labels a uniform shuffle's does; with no disk, the memory's
// window alone gives far fewer.
func TestClassSortedParquetMixesLikeAUniformShuffle(t *testing.T) {
	dir := producertest.Folder(t, 240, 12)
	spec := producertest.Parquet(t, dir, producertest.ParquetOptions{Files: 12, RowsPerGroup: 5})
	sh := producertest.OpenShards(t, spec)
	chunks, _ := producertest.ImageChunks(t, filepath.Dir(spec))
	memory := 2 * chunks / 12
	if err := sh.Arrange(source.ShardSpace{Memory: memory, Disk: 0, Batch: 16}); err != nil {
		t.Fatal(err)
	}
	narrow := sh.Stats().Mix
	if err := sh.Arrange(source.ShardSpace{Memory: memory, Disk: source.AutoDisk, DiskDir: producertest.DiskDir(t), Batch: 16}); err != nil {
		t.Fatal(err)
	}
	wide := sh.Stats().Mix
	t.Logf("memory alone: %.1f distinct labels a batch; with the disk: %.1f (window %d of %d row groups); uniform %.1f", narrow.Distinct, wide.Distinct, sh.ShuffleWindow(), sh.Pieces(), wide.Uniform)
	if wide.Distinct < 0.9*wide.Uniform || narrow.Distinct > 0.7*narrow.Uniform || sh.Pieces() != 48 {
		t.Fatalf("distinct labels a batch: %.1f with the disk, %.1f without, of a uniform shuffle's %.1f; %d pieces, want 48 row groups", wide.Distinct, narrow.Distinct, wide.Uniform, sh.Pieces())
	}
}

// unlabelledRow is a row of a Parquet file of images without labels.
type unlabelledRow struct {
	Image *producertest.HubImage `parquet:"image,optional"`
}

// TestAMissingLabelColumnIsSaid: Parquet files without the Hub's label
// column (and no --columns saying so) are served, every label 0, and
// that is said, in status's shard stats (and on the log); with
// --columns label= it is the user's word, not said again; files with
// and files without labels together are refused at open, naming one of
// each. (Before: label 0 for every row, nothing said.)
func TestAMissingLabelColumnIsSaid(t *testing.T) {
	fdir := producertest.Folder(t, 6, 2)
	folder, err := source.ScanFolder(fdir)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var rows []unlabelledRow
	for i := range folder.Len() {
		img, err := os.ReadFile(folder.Name(i))
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, unlabelledRow{Image: &producertest.HubImage{Bytes: img}})
	}
	producertest.WriteParquet(t, filepath.Join(dir, "train-00000.parquet"), rows, 3, "snappy", "")
	open := func(spec string, cols source.Columns) (source.Source, error) {
		return source.Open(context.Background(), spec, source.Options{Columns: cols})
	}
	src, err := open(filepath.Join(dir, "train-00000.parquet"), source.Columns{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range src.Len() {
		if src.Label(i) != 0 {
			t.Fatalf("sample %d: label %d without a label column", i, src.Label(i))
		}
	}
	if got := src.(*source.Shards).Stats().Labels; !strings.Contains(got, `no label column "label"`) || !strings.Contains(got, "--columns label=NAME") {
		t.Fatalf("status says %q of the labels", got)
	}
	src, err = open(filepath.Join(dir, "train-00000.parquet"), source.Columns{NoLabel: true})
	if err != nil || src.(*source.Shards).Stats().Labels != "" {
		t.Fatalf("--columns label=: %v, status says %q", err, src.(*source.Shards).Stats().Labels)
	}
	// Beside a file of the Hub's, with labels.
	labelled := producertest.Parquet(t, fdir, producertest.ParquetOptions{Files: 1, RowsPerGroup: 3})
	if err := os.Rename(strings.Replace(labelled, "{00000..00000}", "00000", 1), filepath.Join(dir, "train-00001.parquet")); err != nil {
		t.Fatal(err)
	}
	_, err = open(filepath.Join(dir, "train-{00000..00001}.parquet"), source.Columns{})
	if err == nil || !strings.Contains(err.Error(), `some Parquet files have a label column "label" and some do not`) || !strings.Contains(err.Error(), `train-00001.parquet" has it`) {
		t.Fatalf("files with and without labels: %v", err)
	}
}

// TestValidParquetIsReadWhole: legal Parquet that parquet-go misreads is
// served whole, byte for byte: a file of every codec the Hub's writers
// use (LZ4_RAW among them: parquet-go lost every row of it, "decoding
// definition levels: unexpected EOF"), and one file whose row groups
// each have their own codec (parquet-go read every group with the
// first's and lost the rest).
func TestValidParquetIsReadWhole(t *testing.T) {
	dir := producertest.Folder(t, 24, 3)
	want, err := source.ScanFolder(dir)
	if err != nil {
		t.Fatal(err)
	}
	codecs := []string{"lz4raw", "gzip", "brotli", "zstd", "snappy", "none"}
	var parts []string
	for _, c := range codecs {
		spec := producertest.Parquet(t, dir, producertest.ParquetOptions{Files: 1, RowsPerGroup: 5, Codecs: []string{c}})
		parts = append(parts, strings.Replace(spec, "{00000..00000}", "00000", 1))
	}
	check := func(name, spec string, copies int) {
		t.Helper()
		src, err := source.Open(context.Background(), spec, source.Options{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if src.Len() != copies*want.Len() {
			t.Fatalf("%s: %d samples, want %d", name, src.Len(), copies*want.Len())
		}
		order := make([]int, src.Len())
		for i := range order {
			order[i] = i
		}
		got := epochOf(t, src, order)
		for i := range got {
			w := i % want.Len()
			img, err := os.ReadFile(want.Name(w))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got[i], img) || src.Label(i) != want.Label(w) {
				t.Fatalf("%s: sample %d (%s): %d bytes, label %d; want %s's %d bytes, label %d", name, i, src.Name(i), len(got[i]), src.Label(i), want.Name(w), len(img), want.Label(w))
			}
		}
	}
	for k, c := range codecs {
		check(c, parts[k], 1)
	}
	mixed := filepath.Join(t.TempDir(), "mixed.parquet")
	producertest.SpliceParquet(t, mixed, parts...)
	check("row groups of "+strings.Join(codecs, ", "), mixed, len(codecs))
}

// TestARowGroupIsReadOnceAnEpoch: a sparse subset (every fifth row, in a
// shuffled order) reads each row group it wants once an epoch where the
// shard memory holds it (it used to read and decode the whole group for
// each of its rows: a fifth is under the quarter a tar piece needs to be
// read whole); with no shard memory at all, a row group is read whole
// the first time, and from then on each row is its own page (and never
// the group): an epoch then reads about its rows' own bytes (pages of
// about an image here).
func TestARowGroupIsReadOnceAnEpoch(t *testing.T) {
	dir := producertest.Folder(t, 60, 3)
	want, err := source.ScanFolder(dir)
	if err != nil {
		t.Fatal(err)
	}
	spec := producertest.Parquet(t, dir, producertest.ParquetOptions{Files: 1, RowsPerGroup: 20, PageBytes: 1024})
	chunks, groups := producertest.ImageChunks(t, filepath.Dir(spec))
	var subset []int
	var wanted int64
	for i := 0; i < want.Len(); i += 5 {
		subset = append(subset, i)
		img, err := os.ReadFile(want.Name(i))
		if err != nil {
			t.Fatal(err)
		}
		wanted += int64(len(img))
	}
	order := append([]int{}, subset...)
	rand.New(rand.NewPCG(3, 4)).Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
	check := func(what string, src source.Source) {
		t.Helper()
		got := epochOf(t, src, order)
		for _, i := range subset {
			img, _ := os.ReadFile(want.Name(i))
			if !bytes.Equal(got[i], img) {
				t.Fatalf("%s: sample %d: %d bytes, want %s's %d", what, i, len(got[i]), want.Name(i), len(img))
			}
		}
	}
	for _, memory := range []int64{64 << 20, 0} {
		src, err := source.Open(context.Background(), spec, source.Options{Shards: &source.ShardSpace{Memory: memory, Batch: 4}})
		if err != nil {
			t.Fatal(err)
		}
		sh := src.(source.Sharded)
		check("epoch 1", src)
		first := sh.Stats()
		check("epoch 2", src)
		second := sh.Stats()
		reads, bytes := second.Reads+second.AloneReads-first.Reads-first.AloneReads, second.ReadBytes+second.AloneReadBytes-first.ReadBytes-first.AloneReadBytes
		t.Logf("shard memory %d: epoch 1 read %d times, %d bytes; epoch 2 %d times, %d bytes; %d rows of %d bytes wanted, %d row groups of %d bytes",
			memory, first.Reads+first.AloneReads, first.ReadBytes+first.AloneReadBytes, reads, bytes, len(subset), wanted, groups, chunks)
		switch {
		case memory > 0 && (first.Reads != int64(groups) || first.AloneReads != 0 || reads != int64(groups)):
			t.Errorf("shard memory %d: epochs read %d and %d row groups whole and %d samples alone; want each of the %d groups once an epoch", memory, first.Reads, reads, first.AloneReads, groups)
		case memory == 0 && (first.AloneReadBytes > 2*chunks || reads != int64(len(subset)) || bytes > 2*wanted):
			t.Errorf("no shard memory: epoch 1 read %d bytes (the groups are %d), epoch 2 %d reads of %d bytes; want a read a row (%d rows) of about its %d bytes",
				first.AloneReadBytes, chunks, reads, bytes, len(subset), wanted)
		}
	}
}

// BenchmarkWriteParquetFromFolder writes the ImageFolder
// $TSOCK_PARQUET_FROM as Parquet files of the Hub's layout into
// $TSOCK_PARQUET_OUT, in the folder's order (class-sorted), a file for
// each $TSOCK_PARQUET_FILES part of it (default 1), row groups of
// $TSOCK_PARQUET_ROWS (default 100): for scripts/accuracy.sh, which has
// no other Parquet writer (Debian has no pyarrow).
func BenchmarkWriteParquetFromFolder(b *testing.B) {
	from, out := os.Getenv("TSOCK_PARQUET_FROM"), os.Getenv("TSOCK_PARQUET_OUT")
	if from == "" || out == "" {
		b.Skip("TSOCK_PARQUET_FROM and TSOCK_PARQUET_OUT: the folder and where its Parquet files go (scripts/accuracy.sh sets them)")
	}
	number := func(name string, def int) int {
		n, err := strconv.Atoi(os.Getenv(name))
		if err != nil || n <= 0 {
			return def
		}
		return n
	}
	for b.Loop() {
		spec := producertest.Parquet(b, from, producertest.ParquetOptions{Files: number("TSOCK_PARQUET_FILES", 1), RowsPerGroup: number("TSOCK_PARQUET_ROWS", 100), Codecs: []string{"snappy"}})
		if err := os.CopyFS(out, os.DirFS(filepath.Dir(spec))); err != nil {
			b.Fatal(err)
		}
	}
}

// TestARunOfSkippedRowsIsOneEntry: rows left out one after another for
// one reason (null labels) are one entry of what indexing left out,
// counted as their rows: a footer's worth of null labels costs a line,
// not a line a row.
func TestARunOfSkippedRowsIsOneEntry(t *testing.T) {
	dir := producertest.Folder(t, 20, 2)
	spec := producertest.Parquet(t, dir, producertest.ParquetOptions{Files: 1, RowsPerGroup: 10, Edit: func(i int, row *producertest.HubRow) {
		if i >= 2 && i <= 6 || i == 9 {
			row.Label = nil
		}
	}})
	src, err := source.Open(context.Background(), spec, source.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sk := src.(source.Skipper)
	said := strings.Join(sk.Skipped(), "\n")
	if src.Len() != 14 || sk.LeftOut() != 6 || len(sk.Skipped()) != 2 ||
		!strings.Contains(said, ": rows 2 to 6: its label is null or negative") || !strings.Contains(said, ": row 9: its label is null or negative") {
		t.Fatalf("%d samples, %d left out, said:\n%s", src.Len(), sk.LeftOut(), said)
	}
}
