module github.com/tsock/tsock

go 1.26.8

require (
	github.com/dustin/go-humanize v1.1.0
	github.com/hanwen/go-fuse/v2 v2.12.1
	github.com/spf13/pflag v1.0.10
	golang.org/x/image v0.47.0
	golang.org/x/sys v0.49.0
	golang.org/x/term v0.37.0
)

require github.com/NVIDIA/go-nvml v0.13.3-0
