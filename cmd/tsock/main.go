package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/tsock/tsock/batchstore/memfile"
)

// Exit codes: the one place they are decided.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// usageError is a bad command line: exit 2 with usage.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// command is one subcommand: flags parsed in Parse, work done in Run,
// everything it holds released in Close (also after a failed Run).
type command interface {
	Parse(args []string) error
	Run(ctx context.Context) error
	Close() error
	Usage() string
}

const mainUsage = `usage: tsock COMMAND [flags]

commands:
  mount MOUNTPOINT --source DIR   serve preprocessed batches under MOUNTPOINT
  status MOUNTPOINT [--watch]     show a mount: producer, buffer, consumers
  gendata DIR                     write a JPEG dataset in ImageFolder form
  version                         tsock's version and what this machine offers it

run "tsock COMMAND --help" for a command's flags.
`

func main() {
	if len(os.Args) > 1 && os.Args[1] == memfile.HelperArg { // the daemon's own helper (memfile.NewUserTmpfs)
		os.Exit(memfile.RunHelper(os.Args[2:]))
	}
	// SIGHUP (the terminal that started a foreground mount went away) ends
	// the daemon as SIGTERM does: unmounted, never left disconnected.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one command line and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	slog.SetDefault(slog.New(slog.NewTextHandler(stderr, nil)))
	if len(args) == 0 {
		fmt.Fprint(stderr, mainUsage)
		return exitUsage
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, mainUsage) // asked for: a pager or grep reads it
		return exitOK
	}
	if args[0] == "--version" {
		args = append([]string{"version"}, args[1:]...)
	}
	var cmd command
	switch args[0] {
	case "mount":
		cmd = &mountCommand{stdout: stdout}
	case "gendata":
		cmd = &gendataCommand{stdout: stdout}
	case "status":
		cmd = &statusCommand{stdout: stdout}
	case "version":
		cmd = &versionCommand{stdout: stdout}
	default:
		fmt.Fprintf(stderr, "tsock: unknown command %q\n\n%s", args[0], mainUsage)
		return exitUsage
	}
	err := cmd.Parse(args[1:])
	if err == nil {
		err = cmd.Run(ctx)
	}
	if cerr := cmd.Close(); err == nil {
		err = cerr
	}
	return exitCode(err, cmd, stdout, stderr)
}

// exitCode reports err and picks the exit code for it. Help asked for
// goes to stdout; usage after a mistake, to stderr.
func exitCode(err error, cmd command, stdout, stderr io.Writer) int {
	var ue usageError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errHelp):
		fmt.Fprint(stdout, cmd.Usage())
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "tsock: %v\n\n%s", err, cmd.Usage())
		return exitUsage
	default:
		fmt.Fprintf(stderr, "tsock: %v\n", err)
		return exitError
	}
}
