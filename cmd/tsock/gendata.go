package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/pflag"
	"github.com/tsock/tsock/producer/source"
)

// gendataCommand writes a JPEG dataset, for demos, tests and benchmarks.
type gendataCommand struct {
	stdout io.Writer
	flags  *pflag.FlagSet
	dir    string
	opts   source.GenOptions
}

func (c *gendataCommand) Usage() string {
	return flagUsage("usage: tsock gendata DIR [flags]\n\nWrites learnable synthetic JPEGs in ImageFolder form (DIR/classNNN/imgNNNNNN.jpg).", c.flags)
}

func (c *gendataCommand) Parse(args []string) error {
	c.flags = newFlagSet("gendata")
	c.flags.IntVar(&c.opts.Images, "images", 1000, "number of images")
	c.flags.IntVar(&c.opts.Classes, "classes", 10, "number of classes")
	c.flags.IntVar(&c.opts.MinSide, "min-side", 300, "smallest image side, pixels")
	c.flags.IntVar(&c.opts.MaxSide, "max-side", 600, "largest image side, pixels")
	c.flags.IntVar(&c.opts.Quality, "quality", 90, "JPEG quality, 1-100")
	if err := parseFlags(c.flags, args); err != nil {
		return err
	}
	if c.flags.NArg() != 1 {
		return usagef("gendata takes one DIR, got %d arguments", c.flags.NArg())
	}
	c.dir = c.flags.Arg(0)
	o := c.opts
	switch {
	case o.Images < 1, o.Classes < 1, o.Classes > o.Images:
		return usagef("--images %d --classes %d: need 1 <= classes <= images", o.Images, o.Classes)
	case o.MinSide < 1, o.MaxSide < o.MinSide, o.MaxSide > 8192:
		return usagef("--min-side %d --max-side %d: need 1 <= min <= max <= 8192", o.MinSide, o.MaxSide)
	case o.Quality < 1, o.Quality > 100:
		return usagef("--quality %d: must be 1 to 100", o.Quality)
	}
	return nil
}

func (c *gendataCommand) Run(ctx context.Context) error {
	if err := source.WriteFolder(c.dir, c.opts); err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "wrote %d images in %d classes to %s\n", c.opts.Images, c.opts.Classes, c.dir)
	return nil
}

func (c *gendataCommand) Close() error { return nil }
