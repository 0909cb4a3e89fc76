package source

import (
	"fmt"
	"strconv"
	"strings"
)

// Columns names the columns of Parquet files that hold the image and the
// label (--columns); "" takes the Hub's names. NoLabel: the files have
// no label column (every sample's label is 0).
type Columns struct {
	Image   string
	Label   string
	NoLabel bool
}

func (c Columns) image() string {
	if c.Image == "" {
		return defaultImageColumn
	}
	return c.Image
}

func (c Columns) label() string {
	if c.Label == "" {
		return defaultLabelColumn
	}
	return c.Label
}

// ParseColumns reads --columns: image=NAME,label=NAME, either or both; a
// dotted NAME is a nested field (image.bytes). label= with no name: the
// files have no label column (every sample's label is 0).
func ParseColumns(s string) (Columns, error) {
	var c Columns
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(part, "=")
		switch {
		case !ok || (k != "image" && k != "label"):
			return Columns{}, fmt.Errorf("columns %q: want image=NAME,label=NAME", s)
		case seen[k]:
			return Columns{}, fmt.Errorf("columns %q: %s named twice", s, k)
		case k == "image" && v == "":
			return Columns{}, fmt.Errorf("columns %q: the image column needs a name", s)
		case len(v) > 255 || strings.ContainsAny(v, " \t\n\x00"):
			return Columns{}, fmt.Errorf("columns %q: %q is not a column name", s, v)
		}
		seen[k] = true
		if k == "image" {
			c.Image = v
		} else {
			c.Label, c.NoLabel = v, v == ""
		}
	}
	return c, nil
}

// String is the flag's value as ParseColumns reads it.
func (c Columns) String() string {
	label := c.label()
	if c.NoLabel {
		label = ""
	}
	return "image=" + c.image() + ",label=" + label
}

// parquetLabels checks that the Parquet files agree on a label column:
// files with and without one are refused (their samples' labels would
// mean nothing together). Where none has the Hub's label column and
// --columns did not say so (label=), it says what that means: every
// label 0, said at mount and in status, never silent.
func parquetLabels(paths []string, pqs []*parquetShard, cols Columns) (string, error) {
	with, without := -1, -1
	for i, pq := range pqs {
		switch {
		case pq == nil:
		case pq.label >= 0 && with < 0:
			with = i
		case pq.label < 0 && without < 0:
			without = i
		}
	}
	switch {
	case with >= 0 && without >= 0:
		return "", fmt.Errorf("some Parquet files have a label column %q and some do not: %s has it, %s has none; leave the files without labels out, or give --columns label=NAME",
			cols.label(), strconv.Quote(paths[with]), strconv.Quote(paths[without]))
	case without >= 0 && !cols.NoLabel:
		return fmt.Sprintf("no label column %q in the Parquet files: every label 0 — give --columns label=NAME (or label= to say they have none)", cols.label()), nil
	}
	return "", nil
}
