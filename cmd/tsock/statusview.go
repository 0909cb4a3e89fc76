package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/dustin/go-humanize"
	"github.com/spf13/pflag"
	"golang.org/x/term"
)

// statusCommand is `tsock status MOUNTPOINT`: a terminal view of one
// mount, drawn from MOUNTPOINT/status.json.
type statusCommand struct {
	stdout     io.Writer
	flags      *pflag.FlagSet
	mountpoint string
	watch      bool
	json       bool
	interval   time.Duration
	// terminal says whether stdout is a terminal: redraw in place there,
	// plain text anywhere else.
	terminal bool
}

func (c *statusCommand) Usage() string {
	return flagUsage("usage: tsock status MOUNTPOINT [--watch] [--json]\n\nShows a tsock mount: the producer and its rate, the buffer, every consumer.", c.flags)
}

func (c *statusCommand) Parse(args []string) error {
	c.flags = pflag.NewFlagSet("status", pflag.ContinueOnError)
	c.flags.SetOutput(io.Discard)
	c.flags.BoolVarP(&c.watch, "watch", "w", false, "redraw every --interval until Ctrl-C")
	c.flags.BoolVar(&c.json, "json", false, "print one snapshot as JSON (MOUNTPOINT/status.json), for scripts")
	c.flags.DurationVar(&c.interval, "interval", time.Second, "time between redraws with --watch")
	if err := parseFlags(c.flags, args); err != nil {
		return err
	}
	switch {
	case c.flags.NArg() != 1:
		return usagef("want one MOUNTPOINT, got %d arguments", c.flags.NArg())
	case c.watch && c.json:
		return usagef("--watch and --json: pick one")
	case c.interval < 100*time.Millisecond || c.interval > time.Hour:
		return usagef("--interval %s: want 100ms to 1h", c.interval)
	}
	c.mountpoint = c.flags.Arg(0)
	if f, ok := c.stdout.(*os.File); ok {
		c.terminal = term.IsTerminal(int(f.Fd()))
	}
	return nil
}

func (c *statusCommand) Run(ctx context.Context) error {
	if c.json {
		data, _, err := readStatus(c.mountpoint)
		if err != nil {
			return err
		}
		_, err = c.stdout.Write(append(data, '\n'))
		return err
	}
	if !c.watch {
		return c.draw()
	}
	tick := time.NewTicker(c.interval)
	defer tick.Stop()
	if c.terminal {
		// The terminal's alternate screen, as top's: the shell's screen
		// comes back as it was after Ctrl-C.
		fmt.Fprint(c.stdout, "\x1b[?1049h\x1b[?25l")
		defer fmt.Fprint(c.stdout, "\x1b[?25h\x1b[?1049l")
	}
	for first := true; ctx.Err() == nil; first = false {
		if c.terminal {
			// Home, draw over the last view line by line, clear what is left.
			fmt.Fprint(c.stdout, "\x1b[H")
		} else if !first {
			fmt.Fprintln(c.stdout)
		}
		if err := c.draw(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
	return nil
}

// draw prints the view once; with --watch, a mount still starting is
// drawn as what it says, and looked at again.
func (c *statusCommand) draw() error {
	_, doc, err := readStatus(c.mountpoint)
	var starting *startingError
	var view string
	switch {
	case c.watch && errors.As(err, &starting):
		view = clip("tsock "+c.mountpoint+": waiting for it to start", viewWidth) + "\n"
		for _, line := range strings.Split(starting.text, "\n") {
			view += clip(line, viewWidth) + "\n"
		}
	case err != nil:
		return err
	default:
		view = renderStatus(doc, c.mountpoint, time.Now())
	}
	if c.terminal {
		view = strings.ReplaceAll(view, "\n", "\x1b[K\n") + "\x1b[J"
	}
	_, err = io.WriteString(c.stdout, view)
	return err
}

func (c *statusCommand) Close() error { return nil }

// readStatus reads MOUNTPOINT/status.json, as read and as decoded, its
// errors said for people.
func readStatus(mountpoint string) ([]byte, statusDoc, error) {
	var doc statusDoc
	data, err := os.ReadFile(filepath.Join(mountpoint, "status.json"))
	if err != nil {
		return nil, doc, statusReadError(mountpoint, err)
	}
	if json.Unmarshal(data, &doc) != nil {
		return nil, doc, fmt.Errorf("%s is not a tsock mount: its status.json is not tsock's", mountpoint)
	}
	if doc.Version != statusVersion {
		return nil, doc, fmt.Errorf("%s: status.json version %d, this tsock reads version %d: use the tsock that mounted it", mountpoint, doc.Version, statusVersion)
	}
	return data, doc, nil
}

// statusReadError says why MOUNTPOINT/status.json could not be read.
func statusReadError(mountpoint string, err error) error {
	switch {
	case errors.Is(err, syscall.ENOTCONN):
		return fmt.Errorf("%s: the tsock daemon is gone (transport endpoint is not connected); umount %s", mountpoint, mountpoint)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%s: permission denied (a mount is its owner's; mount with --allow-other to show it to others)", mountpoint)
	case errors.Is(err, fs.ErrNotExist):
		if _, serr := os.Stat(mountpoint); serr != nil {
			return fmt.Errorf("%s: %w", mountpoint, unwrapPath(serr))
		}
		if text, serr := os.ReadFile(filepath.Join(mountpoint, "starting")); serr == nil {
			// The starting mount: the source is being listed or indexed.
			return &startingError{fmt.Sprintf("%s: tsock is starting, no status.json yet:\n%s", mountpoint, strings.TrimSpace(string(text)))}
		}
		if entries, derr := os.ReadDir(mountpoint); derr == nil && len(entries) == 0 {
			// An empty directory: a mount may be about to come (`tsock
			// mount … &` has not mounted anything yet).
			return &startingError{fmt.Sprintf("%s: nothing is mounted there yet (an empty directory): is `tsock mount` running?", mountpoint)}
		}
		return fmt.Errorf("%s is not a tsock mount (no status.json)", mountpoint)
	}
	return fmt.Errorf("%s: %w", mountpoint, unwrapPath(err))
}

// startingError: no mount serves at the mountpoint yet, but one may be
// coming (a starting mount, an empty directory). --watch draws it and
// looks again; a single look reports it.
type startingError struct{ text string }

func (e *startingError) Error() string { return e.text }

// unwrapPath drops the path an *fs.PathError repeats.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// The view fits this many columns.
const viewWidth = 80

// renderStatus draws doc for a terminal of viewWidth columns.
func renderStatus(doc statusDoc, mountpoint string, now time.Time) string {
	var b strings.Builder
	line := func(label, format string, args ...any) {
		fmt.Fprintln(&b, clip(fmt.Sprintf("%-10s", label)+fmt.Sprintf(format, args...), viewWidth))
	}
	p := doc.Producer
	fmt.Fprintln(&b, clip(fmt.Sprintf("tsock %s: %s, up %s, %s", mountpoint, doc.State,
		(time.Duration(doc.Uptime)*time.Second).Round(time.Second), now.Format("15:04:05")), viewWidth))
	line("source", "%s", doc.Source)
	line("state", "%s", doc.StateText)
	// The producer's epochs go on as long as a consumer needs one (--epochs
	// counts each consumer's), so they have no total.
	if p.EpochLen > 0 {
		line("epoch", "%-4d %s  %d/%d %s", p.Epoch+1, bar(float64(p.EpochDone)/float64(p.EpochLen), 20),
			p.EpochDone, p.EpochLen, p.Unit)
	} else {
		line("epoch", "%d, %d %s of it", p.Epoch+1, p.EpochDone, p.Unit)
	}
	line("rate", "%.0f %s/s (last 10 s), %.0f overall", p.Rate, p.Unit, p.RateOverall)
	if len(p.RateHistory) > 0 {
		line("last min", "%s", sparkline(p.RateHistory))
	}
	buf := doc.Buffer
	held := buf.Used + buf.Reserved + max(buf.Mapped, 0) // what counts against --buffer
	line("buffer", "%s %s of %s, %d batches", bar(float64(held)/float64(max(buf.Limit, 1)), 20),
		humanize.IBytes(uint64(held)), humanize.IBytes(uint64(buf.Limit)), buf.Batches)
	if buf.Mapped > 0 {
		line("", "%s of it released but still mapped by readers", humanize.IBytes(uint64(buf.Mapped)))
	}
	if k := doc.Kept; k != nil { // beside --buffer, under its own bound (--keep)
		text := fmt.Sprintf("%s %s of %s, %d samples, ", bar(float64(k.Used)/float64(max(k.Limit, 1)), 20),
			humanize.IBytes(uint64(k.Used)), humanize.IBytes(uint64(k.Limit)), k.Samples)
		if k.Refused > 0 { // what matters most: the set does not fit
			text += fmt.Sprintf("%d not kept", k.Refused)
		} else {
			text += fmt.Sprintf("%d copies", k.Served)
		}
		line("kept", "%s", text)
	}
	path, _, _ := strings.Cut(doc.DataPath, " (") // the why is status's to say
	line("data path", "%s", path)
	if doc.Missing > 0 {
		line("skipped", "%d inputs; %d keys missing, held until the epoch's end", doc.Skipped, doc.Missing)
	} else {
		line("skipped", "%d inputs", doc.Skipped)
	}
	if g := doc.GPU; g != nil {
		line("gpu", "%s: %d of %d slabs of %s hold a batch", g.Name, g.InUse, g.Slabs, humanize.IBytes(uint64(g.SlabSize)))
	}
	fmt.Fprintln(&b)
	if len(doc.Consumers) == 0 {
		fmt.Fprintln(&b, "no consumer: mkdir "+clip(filepath.Join(mountpoint, "consumers", "NAME"), viewWidth-6)+" to join")
		return b.String()
	}
	gpu := doc.GPU != nil
	head := fmt.Sprintf("%-16s %-8s %-7s %-19s %5s %5s", "CONSUMER", "STATE", "EPOCH", "PROGRESS", "LAG", "WAIT")
	subsets := false // a column only where some consumer trains on a part (and room for it: not with GPU memory)
	for _, cs := range doc.Consumers {
		if gpu {
			break
		}
		subsets = subsets || (cs.Subset != "" && cs.Subset != "all")
	}
	if subsets {
		head += " SUBSET" // the last column: no padding
	}
	if gpu {
		head += fmt.Sprintf(" %9s", "GPU MEM")
	}
	fmt.Fprintln(&b, head)
	for _, cs := range doc.Consumers {
		fmt.Fprintln(&b, consumerRow(cs, gpu, subsets))
		for _, r := range cs.Ranks {
			fmt.Fprintln(&b, rankRow(cs, r))
		}
	}
	return b.String()
}

// rankRow is a group's rank's line, under the group's: its own state,
// epoch and progress through its share of the epoch.
func rankRow(cs consumerDoc, r rankDoc) string {
	epoch, progress := ofEpochs(max(r.Epoch, 0)+1, cs.Epochs), ""
	if share := (cs.EpochLen + uint64(cs.World) - 1) / uint64(max(cs.World, 1)); share > 0 {
		done := float64(r.EpochDone) / float64(share)
		progress = fmt.Sprintf("%s %3.0f%%", bar(done, 14), 100*min(done, 1))
	}
	return clip(fmt.Sprintf("%-16s %-8s %-7s %-19s", clip(fmt.Sprintf("  rank %d/%d", r.Rank, cs.World), 16), r.State, epoch, progress), viewWidth)
}

// consumerRow is one consumer's line of the view.
func consumerRow(cs consumerDoc, gpu, subsets bool) string {
	epoch, progress := ofEpochs(max(cs.Epoch, 0)+1, cs.Epochs), ""
	if cs.EpochLen > 0 {
		done := float64(cs.EpochDone) / float64(cs.EpochLen)
		progress = fmt.Sprintf("%s %3.0f%%", bar(done, 14), 100*min(done, 1))
	}
	row := fmt.Sprintf("%-16s %-8s %-7s %-19s %5d %4.0f%%", clip(cs.Name, 16), cs.State, epoch, progress, cs.Lag, 100*cs.WaitShare)
	if subsets {
		row += " " + clip(cs.Subset, 11)
	}
	if gpu {
		mem := "?"
		if cs.GPUMemory != nil && *cs.GPUMemory >= 0 {
			mem = humanize.IBytes(uint64(*cs.GPUMemory))
		}
		row += fmt.Sprintf(" %9s", mem)
	}
	return clip(row, viewWidth) // a number no real mount reaches must not wrap it
}

// ofEpochs says epoch n (1-based) of epochs, 0 epochs being forever.
func ofEpochs(n, epochs int) string {
	if epochs <= 0 {
		return fmt.Sprintf("%d/∞", n)
	}
	return fmt.Sprintf("%d/%d", n, epochs)
}

// bar draws fraction f of a width-cell bar.
func bar(f float64, width int) string {
	if !(f > 0) { // NaN too: the document is a program's, it may say anything
		f = 0
	}
	f = min(f, 1)
	full := int(f*float64(width) + 0.5)
	return strings.Repeat("█", full) + strings.Repeat("░", width-full)
}

// sparkline draws values as block heights scaled to their maximum, and
// says the maximum.
func sparkline(values []float64) string {
	const levels = "▁▂▃▄▅▆▇█"
	top := 0.0
	for _, v := range values {
		top = max(top, v)
	}
	var b strings.Builder
	for _, v := range values {
		i := 0
		if top > 0 && v > 0 {
			i = min(int(v/top*7+0.5), 7)
		}
		b.WriteString(string([]rune(levels)[i]))
	}
	return fmt.Sprintf("%s %.0f/s peak", b.String(), top)
}

// clip cuts s to n columns (one per rune), marking the cut. Control
// characters become "?": no file name or consumer name can add a line
// or move the cursor.
func clip(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r >= 0x7f && r <= 0x9f {
			return '?'
		}
		return r
	}, s)
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
