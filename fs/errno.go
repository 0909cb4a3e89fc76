package fs

import (
	"errors"
	"log/slog"
	"syscall"

	"github.com/tsock/tsock/batchstore"
)

// errBadValue is a control-file write that does not parse.
var errBadValue = errors.New("bad value")

// errno maps a store error to the errno the kernel gets. It is the one
// place where that mapping lives.
func errno(err error) syscall.Errno {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, batchstore.ErrNotFound), errors.Is(err, batchstore.ErrNoConsumer):
		return syscall.ENOENT
	case errors.Is(err, batchstore.ErrExists), errors.Is(err, batchstore.ErrPublished):
		return syscall.EEXIST
	case errors.Is(err, batchstore.ErrInterrupted):
		return syscall.EINTR
	case errors.Is(err, batchstore.ErrNoSamples): // before ErrProducerFailed, which wraps it
		return syscall.ENODATA
	case errors.Is(err, batchstore.ErrEvicted), errors.Is(err, batchstore.ErrProducerFailed):
		return syscall.EIO // the consumer's status (or status) says why
	case errors.Is(err, batchstore.ErrBusy), errors.Is(err, batchstore.ErrWriting), errors.Is(err, batchstore.ErrAmbiguous):
		return syscall.EBUSY
	case errors.Is(err, batchstore.ErrBadName), errors.Is(err, batchstore.ErrBadBatchSize), errors.Is(err, batchstore.ErrBadSubset), errors.Is(err, errBadValue), errors.Is(err, batchstore.ErrBadRank),
		errors.Is(err, batchstore.ErrBadBatch):
		return syscall.EINVAL
	case errors.Is(err, batchstore.ErrNotEmpty):
		return syscall.ENOTEMPTY
	case errors.Is(err, batchstore.ErrClosed):
		return syscall.ESHUTDOWN
	case errors.Is(err, batchstore.ErrFinal):
		return syscall.EPERM
	case errors.Is(err, batchstore.ErrTooLarge):
		return syscall.EFBIG
	case errors.Is(err, batchstore.ErrDeadlock):
		return syscall.EDEADLK
	}
	slog.Error("unexpected error in file system request", "err", err)
	return syscall.EIO
}
