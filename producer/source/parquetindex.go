package source

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/parquet-go/parquet-go"

	"github.com/tsock/tsock/producer/source/wds"
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
	for g := range len(pq.groups) - 1 {
		first, rows := pq.groups[g], pq.groups[g+1]-pq.groups[g]
		var raw []byte
		lc := pq.label
		if lc >= 0 {
			off, read, _ := pq.chunk(g, lc)
			raw = make([]byte, read)
			if err := files.readAt(ctx, name, version, raw, off); err != nil {
				return fail(err)
			}
			// The footer's row count is checked against what the label
			// pages hold before a slot or a skip is made a row: a footer
			// that claims ten million rows over five values is the
			// file's lie (the rest of it left out, counted once), not ten
			// million skipped rows.
			if _, values, err := pagesNeed(raw, pq.codec(g, lc)); err == nil && values != rows {
				ix.broke = fmt.Errorf("%w: row group %d: the footer says %d rows, its label pages hold %d values", errNotParquet, g, rows, values)
				return ix
			}
		}
		labels := make([]int64, rows)
		if lc >= 0 {
			off, _, _ := pq.chunk(g, lc)
			err := pq.values(g, lc, raw, off, labelRoom(rows), func(row int, v parquet.Value) error {
				switch {
				case v.IsNull():
					labels[row] = -1
				case v.Kind() == parquet.Int32:
					labels[row] = int64(v.Int32())
				default:
					labels[row] = v.Int64()
				}
				return nil
			})
			if err != nil {
				for r := range rows {
					ix.skips = append(ix.skips, wds.Skip{Key: rowKey(first + r), Why: fmt.Sprintf("its labels do not decode: %v", err)})
				}
				continue
			}
		}
		for r, l := range labels {
			key := rowKey(first + int64(r))
			switch {
			case l < 0:
				ix.skips = append(ix.skips, wds.Skip{Key: key, Why: fmt.Sprintf("label %d (null or negative)", l)})
			case l > maxLabel:
				ix.skips = append(ix.skips, wds.Skip{Key: key, Why: fmt.Sprintf("label %d is over %d", l, maxLabel)})
			default:
				ix.samples = append(ix.samples, wds.Sample{Key: key, Offset: first + int64(r), Label: int(l)})
			}
		}
	}
	return ix
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
// labels' numbers, and for Parquet a note naming the file and why.
func parquetClasses(paths []string, pqs []*parquetShard, cols Columns, maxLabel int) (classes []string, note string) {
	numbers := func() []string {
		c := make([]string, maxLabel+1)
		for i := range c {
			c[i] = strconv.Itoa(i)
		}
		return c
	}
	for i, pq := range pqs {
		if pq == nil || pq.label < 0 {
			continue
		}
		meta, ok := pq.file.Lookup("huggingface")
		if !ok {
			continue
		}
		names, err := hubClassNames(meta, cols.label())
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

// imageRows decodes row group g's image chunk (raw, read at off) into
// dst, and returns where each row's image ends in it; a null image's is
// -1-end, end the row before's.
// An image past dst's room (the footer's sizes lied) is an error.
func (pq *parquetShard) imageRows(g int, raw []byte, off int64, dst []byte) ([]int64, error) {
	ends := make([]int64, 0, pq.groups[g+1]-pq.groups[g])
	at := int64(0)
	err := pq.values(g, pq.image, raw, off, int64(len(dst)), func(row int, v parquet.Value) error {
		if v.IsNull() {
			ends = append(ends, -1-at)
			return nil
		}
		b := v.ByteArray()
		if at+int64(len(b)) > int64(len(dst)) {
			return fmt.Errorf("images of more than the %d bytes the footer says the column holds", len(dst))
		}
		at += int64(copy(dst[at:], b))
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
		return nil, errors.New("its image is null")
	}
	from := int64(0)
	if row > 0 {
		if from = ends[row-1]; from < 0 {
			from = -1 - from
		}
	}
	return data[from:ends[row]], nil
}
