package batchstore

import "errors"

// Errors the store returns; the FUSE adapter maps each to one errno.
var (
	// ErrNotFound: the batch was consumed, freed, or will never exist.
	ErrNotFound = errors.New("no such batch")
	// ErrNoConsumer: no consumer of that name.
	ErrNoConsumer = errors.New("no such consumer")
	// ErrExists: a consumer of that name is already joined.
	ErrExists = errors.New("consumer already exists")
	// ErrInterrupted: the caller's context ended while waiting.
	ErrInterrupted = errors.New("interrupted while waiting")
	// ErrClosed: the store is shut down.
	ErrClosed = errors.New("store closed")
	// ErrTooLarge: a batch larger than the whole buffer.
	ErrTooLarge = errors.New("batch larger than the buffer")
	// ErrEvicted: the consumer was evicted (see its status for why).
	ErrEvicted = errors.New("consumer evicted")
	// ErrBusy: the consumer already started reading.
	ErrBusy = errors.New("consumer already reading")
	// ErrAmbiguous: a batch opened without a lookup (a reopen through
	// /proc/self/fd) that more than one consumer looked up: whose it is
	// cannot be told.
	ErrAmbiguous = errors.New("whose batch it is cannot be told")
	// ErrProducerFailed: the producer stopped on an error before making
	// the batch waited for (not the end of the data).
	ErrProducerFailed = errors.New("the producer failed")
	// ErrBadBatchSize: a batch size that is not allowed.
	ErrBadBatchSize = errors.New("invalid batch size")
	// ErrBadSubset: a consumer subset that is refused (the message says
	// what was wrong).
	ErrBadSubset = errors.New("invalid subset")
	// ErrBadName: a consumer name that is not allowed.
	ErrBadName = errors.New("invalid consumer name")
	// ErrBadBatch: an ingested batch, or a control-file value, that is
	// refused (the message says what was wrong).
	ErrBadBatch = errors.New("invalid batch")
	// ErrPublished: an ingested batch number that is already published.
	ErrPublished = errors.New("batch already published")
	// ErrDeadlock: the consumer waited, for the consumer timeout, for a
	// batch that the full buffer cannot make until readers read, give up
	// or unmap what it holds: no wait of the store's could end.
	ErrDeadlock = errors.New("a wait that only reading, unlinking or unmapping batches can end")
	// ErrNoSamples: a producer epoch ended with no sample in it: every
	// sample of the dataset was skipped, so none can ever be made again.
	ErrNoSamples = errors.New("no samples left: every sample of the dataset was skipped")
	// ErrFinal: a write or truncation of an ingested batch after its
	// writer's close published or refused it: its bytes are final.
	ErrFinal = errors.New("the batch was published or refused at its writer's close: its bytes are final")
	// ErrNotEmpty: a group whose ranks have not all left.
	ErrNotEmpty = errors.New("a group with ranks that have not left")
	// ErrWriting: another writer has the next ingested batch open.
	ErrWriting = errors.New("batch being written by another writer")
)
