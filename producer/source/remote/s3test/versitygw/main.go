// Command versitygw is versitygw's S3 gateway with its POSIX backend
// alone, for tsock's tests (package s3test starts it on loopback).
//
// Why not versitygw's own command: it links every backend (Azure, S3
// proxy, ScoutFS, plugins) and its integration tests, 224 s of CPU to
// build on a fresh 2-core machine; this links the same gateway
// (versitygw's embedgw, its library entry point) and the same POSIX
// backend in 159 s. It is a module of its own so that tsock's module
// does not depend on versitygw. The command line is the subset of
// versitygw's that s3test uses, so that $TSOCK_VERSITYGW may name a
// real versitygw:
//
//	versitygw --access KEY --secret SECRET --port ADDR posix DIR
//
// Its defaults are versitygw's command's (region, connection and
// request limits, multipart parts, POSIX permissions, xattr metadata).
package main

import (
	"context"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"syscall"

	"github.com/versity/versitygw/backend/meta"
	"github.com/versity/versitygw/backend/posix"
	"github.com/versity/versitygw/embedgw"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "versitygw:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	flags := flag.NewFlagSet("versitygw", flag.ContinueOnError)
	access := flags.String("access", "", "the root user's access key")
	secret := flags.String("secret", "", "the root user's secret key")
	port := flags.String("port", ":7070", "the address to listen on")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if flags.NArg() != 2 || flags.Arg(0) != "posix" {
		return fmt.Errorf("usage: versitygw --access KEY --secret SECRET --port ADDR posix DIR (got %q)", flags.Args())
	}
	root := flags.Arg(1)
	if err := (meta.XattrMeta{}).Test(root); err != nil {
		return fmt.Errorf("xattr check of %s: %w", root, err)
	}
	opts := posix.PosixOpts{
		Concurrency:         5000,
		IOBufferSize:        1024 * 1024,
		CopyObjectThreshold: 5 * 1024 * 1024 * 1024,
	}
	opts.SetNewDirPerm(fs.FileMode(0o755))
	opts.SetNewFilePerm(fs.FileMode(0o644))
	be, err := posix.New(root, meta.XattrMeta{}, opts)
	if err != nil {
		return fmt.Errorf("the POSIX backend over %s: %w", root, err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return embedgw.RunVersityGW(ctx, be, &embedgw.Config{
		RootUserAccess:      *access,
		RootUserSecret:      *secret,
		Region:              "us-east-1",
		Ports:               []string{*port},
		MaxConnections:      250000,
		MaxRequests:         100000,
		AdminMaxConnections: 250000,
		AdminMaxRequests:    100000,
		MultipartMaxParts:   10000,
		Quiet:               true,
		IAMCacheTTL:         120,
		IAMCachePrune:       3600,
	})
}
