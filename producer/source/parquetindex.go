package source

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/tsock/tsock/producer/source/internal/pqfile"

	"github.com/tsock/tsock/producer/source/internal/wds"
)

// indexParquet indexes one Parquet file: its footer (one request for its
// last 64 KiB, a second where the footer is longer) and its labels (a
// request a row group, the label column's chunk alone). What the file's
// own bytes say is wrong leaves rows out, each named and counted: the
// whole file where its footer is no Parquet footer (broke: counted as a
// typical file's rows), a row group whose labels do not decode, a row
// whose label is null or negative. A read that fails is the file's error,
// as a tar shard's is: the mount fails naming it.
func indexParquet(ctx context.Context, files shardFiles, name string, cols Columns) shardIndex {
	fail := func(err error) shardIndex {
		return shardIndex{err: fmt.Errorf("file %s: %w", strconv.Quote(name), err)}
	}
	version, size, err := files.version(ctx, name)
	if err != nil {
		return fail(err)
	}
	ix := shardIndex{version: version, size: size}
	pq, err := readFooter(ctx, files, name, version, size, cols)
	var cut *unusable
	switch {
	case errors.As(err, &cut):
		ix.lost, ix.lostWhy = cut.rows, err.Error()
		return ix
	case errors.Is(err, errNotParquet):
		ix.broke = err
		return ix
	case err != nil:
		return fail(err)
	}
	ix.footer, ix.pq = pq.footer, pq
	pq.footer = nil // the index file's to keep, not the mount's
	defer func() { pq.labels = nil }()
	// A run of rows left out for one reason is one skip, counted as its
	// rows (a million null labels: one entry): end is the row after the
	// last skip's run.
	end := int64(-1)
	skip := func(r int64, why string) {
		if n := len(ix.skips); n > 0 && end == r && ix.skips[n-1].Why == why {
			last := &ix.skips[n-1]
			last.Rows++
			last.Key = rowsKey(r+1-last.Rows, last.Rows)
		} else {
			ix.skips = append(ix.skips, wds.Skip{Key: rowKey(r), Why: why, Rows: 1})
		}
		end = r + 1
	}
	for g, rg := range pq.groups {
		if pq.label < 0 {
			for r := range rg.rows {
				ix.samples = append(ix.samples, wds.Sample{Key: rowKey(rg.first + r), Offset: rg.first + r})
			}
			continue
		}
		ch := pq.labels[g]
		raw := make([]byte, ch.Size)
		if err := files.readAt(ctx, name, version, raw, ch.Off); err != nil {
			return fail(err)
		}
		col := pq.labelCol
		col.Codec = ch.Codec
		samples, skips := len(ix.samples), len(ix.skips)
		// The row count is checked against the label pages' value counts
		// before a value is decoded, and a run of levels is never
		// expanded: a footer that claims more rows than the pages hold
		// loses its row group, said once for all its rows.
		err := pq.values(g, col, raw, labelRoom(rg.rows), func(row int, v pqfile.Value) error {
			r := rg.first + int64(row)
			switch {
			case v.Null || v.Int < 0:
				skip(r, "its label is null or negative")
			case v.Int > maxLabel:
				skip(r, fmt.Sprintf("its label is over %d", maxLabel))
			default:
				ix.samples = append(ix.samples, wds.Sample{Key: rowKey(r), Offset: r, Label: int(v.Int)})
			}
			return nil
		})
		if err != nil {
			ix.samples, ix.skips, end = ix.samples[:samples], ix.skips[:skips], -1
			ix.skips = append(ix.skips, wds.Skip{Key: rowsKey(rg.first, rg.rows), Why: fmt.Sprintf("its labels do not decode: %v", err), Rows: rg.rows})
		}
	}
	ix.broke = pq.cut
	return ix
}

// rowsKey names rows first to first+n-1 of a file.
func rowsKey(first, n int64) string {
	if n == 1 {
		return rowKey(first)
	}
	return fmt.Sprintf("rows %d to %d", first, first+n-1)
}

// skipped is how many samples skips stand for.
func skipped(skips []wds.Skip) int64 {
	var n int64
	for _, sk := range skips {
		n += sk.Samples()
	}
	return n
}

// labelRoom is the most a label column of rows may take decompressed:
// 8 bytes a value and 4 of levels, a dictionary as large, and a page's
// worth of headers and slack. An integer column cannot need more.
func labelRoom(rows int64) int64 { return 20*rows + 1<<20 }

// maxLabel bounds a label: classes are a list in memory and in status.
const maxLabel = wds.MaxLabel - 1

// rowKey names row r of a file in messages and in the index.
func rowKey(r int64) string { return "row " + strconv.FormatInt(r, 10) }

// readFooter reads file name's tail and parses its footer.
func readFooter(ctx context.Context, files shardFiles, name, version string, size int64, cols Columns) (*parquetShard, error) {
	n := min(size, parquetTail)
	for {
		tail := make([]byte, n)
		if err := files.readAt(ctx, name, version, tail, size-n); err != nil {
			return nil, err
		}
		pq, err := openParquet(tail, size, cols)
		var short errShortTail
		if !errors.As(err, &short) || n >= short.need {
			return pq, err
		}
		n = short.need
	}
}

// hubFeatures is the part of the Hub's metadata (the "huggingface" key
// of a file's key-value metadata) that names the classes.
type hubFeatures struct {
	Info struct {
		Features map[string]json.RawMessage `json:"features"`
	} `json:"info"`
}

type hubClassLabel struct {
	Type  string   `json:"_type"`
	Names []string `json:"names"`
}

// maxClassName bounds a class name as kept.
const maxClassName = 1024

// hubClassNames reads the class names of column label from the Hub's
// metadata: nil, nil where it names none (a feature that is not a
// ClassLabel, or no metadata for the column); an error where it is not
// JSON or not the Hub's shape.
func hubClassNames(meta, label string) ([]string, error) {
	var h hubFeatures
	if err := json.Unmarshal([]byte(meta), &h); err != nil {
		return nil, fmt.Errorf("the huggingface metadata is not JSON the Hub writes: %w", err)
	}
	raw, ok := h.Info.Features[label]
	if !ok {
		return nil, nil
	}
	var cl hubClassLabel
	if err := json.Unmarshal(raw, &cl); err != nil {
		return nil, nil // another kind of feature (a plain integer): no names
	}
	if cl.Type != "ClassLabel" {
		return nil, nil
	}
	if len(cl.Names) > maxLabel+1 {
		return nil, fmt.Errorf("the huggingface metadata names %d classes, over %d", len(cl.Names), maxLabel+1)
	}
	for i, n := range cl.Names {
		if len(n) > maxClassName {
			cl.Names[i] = n[:maxClassName]
		}
	}
	return cl.Names, nil
}

// parquetClasses are the class names of a dataset: a Parquet one's, the
// Hub's, from the first file whose metadata has them, where they name
// every label used (maxLabel, the largest); else (tar shards too) the
// labels' numbers, and a note naming the file and why.
func parquetClasses(paths []string, pqs []*parquetShard, cols Columns, maxLabel int) (classes []string, note string) {
	numbers := func() []string { return labelNumbers(maxLabel) }
	for i, pq := range pqs {
		if pq == nil || pq.label < 0 {
			continue
		}
		if pq.hub == "" {
			continue
		}
		names, err := hubClassNames(pq.hub, cols.label())
		switch {
		case err != nil:
			return numbers(), fmt.Sprintf("%s: %v: the classes are named by their numbers", paths[i], err)
		case names == nil:
			continue
		case len(names) <= maxLabel:
			return numbers(), fmt.Sprintf("%s: the huggingface metadata names %d classes, but labels go up to %d: the classes are named by their numbers", paths[i], len(names), maxLabel)
		}
		return names, ""
	}
	return numbers(), ""
}

// imageRows decodes row group g's image chunk (raw: its bytes) into
// dst, and returns where each row's image ends in it; a null image's is
// -1-end, end the row before's. An image past dst's room (the footer's
// sizes lied) is an error.
func (pq *parquetShard) imageRows(g int, raw []byte, dst []byte) ([]int64, error) {
	ends := make([]int64, 0, pq.groups[g].rows)
	at := int64(0)
	err := pq.values(g, pq.imageCol(g), raw, int64(len(dst)), func(row int, v pqfile.Value) error {
		if v.Null {
			ends = append(ends, -1-at)
			return nil
		}
		if at+int64(len(v.Bytes)) > int64(len(dst)) {
			return fmt.Errorf("images of more than the %d bytes the footer says the column holds (%w)", len(dst), errTooBig)
		}
		at += int64(copy(dst[at:], v.Bytes))
		ends = append(ends, at)
		return nil
	})
	return ends, err
}

// rowImage is row's image in a decoded row group (dst and ends from
// imageRows); an error where it is null.
func rowImage(data []byte, ends []int64, row int64) ([]byte, error) {
	if row < 0 || row >= int64(len(ends)) {
		return nil, fmt.Errorf("row %d of a row group of %d: %w", row, len(ends), ErrShardChanged)
	}
	if ends[row] < 0 {
		return nil, errNullImage
	}
	from := int64(0)
	if row > 0 {
		if from = ends[row-1]; from < 0 {
			from = -1 - from
		}
	}
	return data[from:ends[row]], nil
}
