package source

import (
	"fmt"
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
