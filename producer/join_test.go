package producer_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/tsock/tsock/batchstore"
	"github.com/tsock/tsock/batchstore/batchfile"
	"github.com/tsock/tsock/batchstore/memfile"
	"github.com/tsock/tsock/batchstore/waittest"
	"github.com/tsock/tsock/producer"
	"github.com/tsock/tsock/producer/pipeline"
	"github.com/tsock/tsock/producer/producertest"
	"github.com/tsock/tsock/producer/source"
)

// TestRandomJoinSchedulesGiveExactEpochs is the proof of stitching: over
// many random schedules (dataset size, batch size, epochs, buffer, and
// consumers that join at random moments with their own batch sizes), every
// consumer reads exactly its epochs — each sample once per epoch, only an
// epoch's last batch short — while the producer runs once for all. A
// schedule is its seed's alone: a consumer joins when the first has read
// the seed's number of batches and the store has settled (settled), so a
// failing seed fails again.
func TestRandomJoinSchedulesGiveExactEpochs(t *testing.T) {
	var stitched, rebatched, direct int
	for seed := uint64(0); seed < 60; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			s, r, d := joinSchedule(t, seed)
			stitched, rebatched, direct = stitched+s, rebatched+r, direct+d
		})
	}
	t.Logf("%d stitched joiners, %d re-batched and %d shared batches read", stitched, rebatched, direct)
	if stitched < 10 || rebatched < 100 || direct < 100 {
		t.Fatal("the schedules do not exercise stitching, re-batching and sharing enough")
	}
}

type joiner struct {
	name      string
	at        int // joins once the first consumer has read this many batches
	batchSize int
	got       []*batchfile.Batch
	rebatched int // batches read as re-batched files
	stitched  bool
	err       error
}

// joinSchedule runs one schedule and returns how many joiners were
// stitched and how many re-batched and shared batches were read.
func joinSchedule(t *testing.T, seed uint64) (stitched, rebatched, direct int) {
	rng := rand.New(rand.NewPCG(seed, 7))
	n := 10 + rng.IntN(40)
	cfg := producer.Config{
		Source: source.NewSyntheticSized(n, 3, 6, 14), BatchSize: 2 + rng.IntN(6), ImageSize: 4,
		Epochs: 1 + rng.IntN(3), Workers: 1 + rng.IntN(3), Seed: seed, Layout: pipeline.NCHW, Transform: pipeline.Train,
	}
	store := batchstore.New(producer.StoreConfig(cfg, cfg.BatchBytes()*int64(4+rng.IntN(4))))
	defer store.Close()
	p, err := producer.New(cfg, store, memfile.NewMemFD())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()

	firstBatches := (n + cfg.BatchSize - 1) / cfg.BatchSize * cfg.Epochs
	sizes := []int{cfg.BatchSize, 1 + rng.IntN(2*cfg.BatchSize), cfg.BatchSize * 2, max(1, cfg.BatchSize/2)}
	first := &joiner{name: "first", batchSize: cfg.BatchSize}
	joiners := []*joiner{first}
	for i := 0; i < 1+rng.IntN(3); i++ {
		joiners = append(joiners, &joiner{name: fmt.Sprintf("late%d", i), at: rng.IntN(firstBatches + 1),
			batchSize: sizes[rng.IntN(len(sizes))]})
	}
	var wg sync.WaitGroup
	start := func(i int, j *joiner) {
		wg.Go(func() { j.err = j.run(ctx, store, batchstore.CallerID(i+1), nil) })
	}
	// The first consumer lets the others in as it reaches their points.
	wg.Go(func() {
		first.err = first.run(ctx, store, 1, func(read int) {
			for i, j := range joiners[1:] {
				if j.at == read {
					j.err = waittest.Wait(fmt.Sprintf("the store settles before %s joins", j.name), func() bool { return settled(store, joiners) })
					if j.err == nil {
						j.err = j.join(store)
					}
					if j.err == nil {
						start(i+1, j)
					}
				}
			}
		})
	})
	wg.Wait()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("producer: %v", err)
	}
	for _, j := range joiners {
		if j.err != nil {
			t.Fatalf("%s: %v", j.name, j.err)
		}
		want := producertest.Stream{Good: producertest.All(n), Label: cfg.Source.Label, BatchSize: j.batchSize, Epochs: cfg.Epochs}
		if err := want.Check(j.got); err != nil {
			cs, _ := store.ConsumerSnapshot(j.name)
			t.Fatalf("%s (n=%d batch=%d own batch=%d epochs=%d joined at producer epoch %d sample %d): %v",
				j.name, n, cfg.BatchSize, j.batchSize, cfg.Epochs, cs.JoinedEpoch, cs.JoinedPos, err)
		}
		rebatched += j.rebatched
		direct += len(j.got) - j.rebatched
		if j.stitched {
			stitched++
		}
	}
	return stitched, rebatched, direct
}

// settled: nothing in the store moves until the first consumer reads on.
// The producer waits for room, idles or is done, and every other consumer
// waits for a batch or has left: the state in which a join lands is then
// the schedule's, whatever the threads' timing.
func settled(s *batchstore.Store, joiners []*joiner) bool {
	snap := s.Snapshot()
	if !snap.ProducerWaiting && !snap.ProducerIdle && !snap.Finished {
		return false
	}
	for _, j := range joiners[1:] {
		if cs, err := s.ConsumerSnapshot(j.name); err == nil && !cs.Waiting && !cs.Done {
			return false
		}
	}
	return true
}

// join joins j with its own batch size.
func (j *joiner) join(s *batchstore.Store) error {
	if err := s.Join(j.name); err != nil {
		return err
	}
	if err := s.SetBatchSize(j.name, j.batchSize); err != nil {
		return err
	}
	cs, _ := s.ConsumerSnapshot(j.name)
	j.stitched = cs.Stitched
	return nil
}

// run reads every batch j gets (joining first if it has not joined) and
// leaves; after, if set, is called with the count read before each batch
// and once at the end.
func (j *joiner) run(ctx context.Context, s *batchstore.Store, caller batchstore.CallerID, after func(read int)) error {
	if _, err := s.ConsumerSnapshot(j.name); err != nil {
		if err := j.join(s); err != nil {
			return err
		}
	}
	if err := readAll(ctx, s, j, 0, caller, after); err != nil {
		return err
	}
	return s.Leave(j.name)
}

// readRef reads one batch as the file system serves it.
func readRef(s *batchstore.Store, name string, ref batchstore.Ref, caller batchstore.CallerID) (*batchfile.Batch, error) {
	var l *batchstore.Lease
	var err error
	var data interface {
		ReadAt([]byte, int64) (int, error)
	}
	if ref.Direct {
		l, err = s.Open(ref.Seq, caller)
		if err == nil {
			data = l.Blob()
		}
	} else {
		l, err = s.OpenBatch(name, ref.Local)
		if err == nil {
			data, err = batchfile.Compose(ref, l.Blobs(), name)
		}
	}
	if err != nil {
		return nil, err
	}
	defer l.Release()
	buf := make([]byte, ref.Size)
	if n, err := data.ReadAt(buf, 0); err != nil && !(errors.Is(err, io.EOF) && n == len(buf)) {
		return nil, err
	}
	return batchfile.ParseBatch(buf)
}

// TestJoinAtEpochWaitsForTheNextEpoch: with --join epoch a consumer that
// joins mid-epoch starts at the next producer epoch, aligned, and still
// gets all its epochs.
func TestJoinAtEpochWaitsForTheNextEpoch(t *testing.T) {
	cfg := producer.Config{
		Source: source.NewSyntheticSized(20, 2, 6, 10), BatchSize: 4, ImageSize: 4, Epochs: 2,
		Workers: 2, Seed: 1, Layout: pipeline.NHWC, Transform: pipeline.Train,
	}
	storeCfg := producer.StoreConfig(cfg, cfg.BatchBytes()*3)
	storeCfg.JoinAtEpoch = true
	store := batchstore.New(storeCfg)
	defer store.Close()
	p, err := producer.New(cfg, store, memfile.NewMemFD())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	first := &joiner{name: "first", batchSize: 4}
	if err := store.Join("first"); err != nil {
		t.Fatal(err)
	}
	for local := uint64(0); local < 2; local++ { // mid-epoch 0
		ref, err := store.Lookup(ctx, "first", local, 1)
		if err != nil {
			t.Fatal(err)
		}
		b, err := readRef(store, "first", ref, 1)
		if err != nil {
			t.Fatal(err)
		}
		first.got = append(first.got, b)
	}
	if err := store.Join("aligned"); err != nil {
		t.Fatal(err)
	}
	cs, _ := store.ConsumerSnapshot("aligned")
	if cs.Stitched || cs.JoinedPos != 0 || cs.JoinedEpoch != 1 {
		t.Fatalf("--join epoch placed the joiner at %+v, want producer epoch 1 sample 0", cs)
	}
	late := &joiner{name: "aligned", batchSize: 4}
	errs := make(chan error, 2)
	go func() { errs <- readAll(ctx, store, first, 2, 1, nil) }()
	go func() { errs <- readAll(ctx, store, late, 0, 2, nil) }()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	<-done
	for _, j := range []*joiner{first, late} {
		want := producertest.Stream{Good: producertest.All(20), Label: cfg.Source.Label, BatchSize: 4, Epochs: 2}
		if err := want.Check(j.got); err != nil {
			t.Fatalf("%s: %v", j.name, err)
		}
	}
	// first's epochs are the producer's: it reads the shared files. The
	// joiner's epoch 0 is producer epoch 1, and a shared file's metadata
	// names the producer's epoch, so it reads files of its own.
	if first.rebatched != 0 || late.rebatched == 0 {
		t.Fatalf("re-batched files read: first %d (want 0), aligned %d (want all)", first.rebatched, late.rebatched)
	}
}

// readAll reads j's batches from number from on until the end; after, if
// set, is called with the number read before each lookup and at the end.
func readAll(ctx context.Context, s *batchstore.Store, j *joiner, from uint64, caller batchstore.CallerID, after func(read int)) error {
	for local := from; ; local++ {
		if after != nil {
			after(len(j.got))
		}
		ref, err := s.Lookup(ctx, j.name, local, caller)
		if errors.Is(err, batchstore.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		b, err := readRef(s, j.name, ref, caller)
		if err != nil {
			return err
		}
		j.got = append(j.got, b)
		if !ref.Direct {
			j.rebatched++
		}
	}
}
