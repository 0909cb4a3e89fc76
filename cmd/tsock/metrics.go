package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// metrics renders MOUNTPOINT/metrics in the Prometheus text format: the
// numbers of status, one series per consumer, for tools to scrape.
func (c *mountCommand) metrics() ([]byte, error) { return []byte(metricsText(c.snapshot())), nil }

// metricsText is a snapshot in the Prometheus text format.
func metricsText(s *mountSnapshot) string {
	snap := s.store
	var b strings.Builder
	gauge := func(name, help string, v float64) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n%s %g\n", name, help, name, name, v)
	}
	counter := func(name, help string, v float64) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s counter\n%s %g\n", name, help, name, name, v)
	}
	gauge("tsock_buffer_limit_bytes", "Memory allowed for batches (--buffer).", float64(snap.Limit))
	gauge("tsock_buffer_used_bytes", "Memory held by published batches.", float64(snap.Used))
	gauge("tsock_buffer_batches", "Batches held in memory.", float64(snap.Held))
	if snap.Lingering >= 0 {
		gauge("tsock_buffer_mapped_after_release_bytes", "Memory of batches already released that readers still map (part of the buffer).", float64(snap.Lingering))
	}
	counter("tsock_batches_published_total", "Batches published.", float64(snap.Published))
	counter("tsock_samples_published_total", "Samples published.", float64(snap.SamplesPublished))
	counter("tsock_producer_wait_seconds_total", "Time the producer waited for room in the buffer.", snap.ProducerWait.Seconds())
	if s.ingest != nil {
		counter("tsock_ingest_refused_total", "Ingested batches refused at close.", float64(s.ingest.Refused))
	}
	gauge("tsock_producer_epoch", "Producer epoch being made.", float64(s.epoch))
	if cs := s.cache; cs != nil {
		gauge("tsock_cache_bytes", "Encoded files held by the raw cache (--cache).", float64(cs.Used))
		counter("tsock_cache_hits_total", "Source reads answered from the raw cache.", float64(cs.Hits))
		counter("tsock_cache_misses_total", "Source reads that went to the source (disk or network).", float64(cs.Misses))
		counter("tsock_cache_dropped_total", "Files not kept for a failed write to the disk cache.", float64(cs.Dropped))
	}
	if k := s.kept; k != nil {
		gauge("tsock_kept_bytes", "Made samples kept for later epochs (--keep).", float64(k.Used))
		counter("tsock_kept_served_total", "Samples copied from the kept ones instead of decoded.", float64(k.Served))
	}
	if sh := s.shards; sh != nil {
		gauge("tsock_shard_held_bytes", "Pieces of tar shards held (--shard-memory and --shard-disk).", float64(sh.HeldBytes))
		gauge("tsock_shard_disk_used_bytes", "Shard disk in use (--shard-disk).", float64(sh.DiskMapped))
		counter("tsock_shard_piece_reads_total", "Pieces of tar shards read (a shard whole, or a part of one), a request each.", float64(sh.Reads))
		counter("tsock_shard_read_ahead_wasted_total", "Pieces read ahead or kept for an epoch that began otherwise (a consumer joined mid-epoch).", float64(sh.Wasted))
	}
	if r := s.remote; r != nil {
		counter("tsock_remote_requests_total", "Requests to the object store, every attempt.", float64(r.requests))
		counter("tsock_remote_retries_total", "Object store requests tried again after a transient fault.", float64(r.retries))
		counter("tsock_remote_failures_total", "Object store requests that failed for good.", float64(r.failures))
		counter("tsock_remote_throttled_total", "Object store answers that asked to slow down (SlowDown): retried and paced.", float64(r.throttled))
		counter("tsock_remote_bytes_total", "Bytes read from the object store.", float64(r.bytes))
		counter("tsock_remote_resumed_total", "Object store reads that broke off and went on from the byte reached.", float64(r.resumed))
		gauge("tsock_remote_waiting_requests", "Requests waiting out the object store's faults now (the producer waits on the store).", float64(r.waiting))
		gauge("tsock_remote_waited_seconds", "How long the store has failed the requests waiting now.", r.waitedFor)
		gauge("tsock_remote_retry_budget_seconds", "How long a request waits out faults before the run fails (--s3-retry-for).", r.retryFor)
	}
	if g := s.gpu; g != nil {
		gauge("tsock_gpu_slabs", "GPU slabs allocated (--device).", float64(g.slabs))
		gauge("tsock_gpu_slabs_in_use", "GPU slabs holding a batch.", float64(g.inUse))
		gauge("tsock_gpu_slab_bytes", "Size of one GPU slab.", float64(g.slabSize))
	}
	gauge("tsock_skipped_inputs", "Distinct inputs skipped as unreadable or corrupt.", float64(s.skipped))
	perConsumer := []struct {
		name, kind, help string
		value            func(i int) float64
	}{
		{"tsock_consumer_position", "gauge", "The consumer's next batch number.", func(i int) float64 { return float64(snap.Consumers[i].Position) }},
		{"tsock_consumer_epoch", "gauge", "Epoch of the last batch consumed (-1 before any).", func(i int) float64 { return float64(snap.Consumers[i].Epoch) }},
		{"tsock_consumer_lag_batches", "gauge", "Published batches not yet consumed.", func(i int) float64 { return float64(snap.Consumers[i].Lag) }},
		{"tsock_consumer_lag_bytes", "gauge", "Bytes of published batches not yet consumed.", func(i int) float64 { return float64(snap.Consumers[i].LagBytes) }},
		{"tsock_consumer_batches_read_total", "counter", "Batches consumed.", func(i int) float64 { return float64(snap.Consumers[i].BatchesRead) }},
		{"tsock_consumer_samples_read_total", "counter", "Samples consumed.", func(i int) float64 { return float64(snap.Consumers[i].SamplesRead) }},
		{"tsock_consumer_bytes_read_total", "counter", "Bytes of batches consumed.", func(i int) float64 { return float64(snap.Consumers[i].BytesRead) }},
		{"tsock_consumer_open_batches", "gauge", "Batches the consumer holds open.", func(i int) float64 { return float64(snap.Consumers[i].OpenBatches) }},
		{"tsock_consumer_wait_seconds_total", "counter", "Time spent blocked waiting for a batch (exposed wait).", func(i int) float64 { return snap.Consumers[i].WaitTotal.Seconds() }},
		{"tsock_consumer_evicted", "gauge", "1 if the consumer was evicted.", func(i int) float64 { return bool01(snap.Consumers[i].Evicted != "") }},
		{"tsock_consumer_done", "gauge", "1 if the consumer read everything there will be.", func(i int) float64 { return bool01(snap.Consumers[i].Done) }},
	}
	for _, m := range perConsumer {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", m.name, m.help, m.name, m.kind)
		for i, cs := range snap.Consumers {
			fmt.Fprintf(&b, "%s{consumer=%q} %g\n", m.name, cs.Name, m.value(i))
		}
	}
	return b.String()
}

func bool01(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// metricsServer serves /metrics (and /status.json) over HTTP for
// --metrics-listen: Prometheus scrapes a port, not a file in a mount.
// It is bounded: metricsLimits caps the connections it holds at once,
// how long a request or an idle keep-alive may hold one, and a request's
// headers, so that no client (nor a few hundred) can pin its memory.
type metricsServer struct {
	listener *limitListener
	server   *http.Server
}

// metricsLimits are the listener's bounds; a variable for tests.
var metricsLimits = struct {
	conns                     int
	header, read, write, idle time.Duration
	headerBytes               int
}{conns: 16, header: 5 * time.Second, read: 10 * time.Second, write: 10 * time.Second, idle: 30 * time.Second, headerBytes: 8 << 10}

// limitListener accepts at most cap(slots) connections at once; the next
// waits in the kernel's backlog until one closes.
type limitListener struct {
	net.Listener
	slots  chan struct{}
	closed chan struct{} // Close: an Accept waiting for a slot ends
	once   sync.Once
	peak   atomic.Int64 // the most held at once, for tests
}

func newLimitListener(l net.Listener, n int) *limitListener {
	return &limitListener{Listener: l, slots: make(chan struct{}, n), closed: make(chan struct{})}
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.closed:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	held := int64(len(l.slots))
	for p := l.peak.Load(); held > p && !l.peak.CompareAndSwap(p, held); p = l.peak.Load() {
	}
	return &limitedConn{Conn: c, release: func() { <-l.slots }}, nil
}

// Close stops accepting, a wait for a slot included.
func (l *limitListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// limitedConn gives its slot back once, at its first Close.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// listenMetrics binds addr at start, so that a taken port fails the
// mount before anything is mounted.
func (c *mountCommand) listenMetrics() error {
	if c.metricsListen == "" {
		return nil
	}
	m, err := newMetricsServer(c.metricsListen, c.metrics, c.statusJSON)
	if err != nil {
		return fmt.Errorf("--metrics-listen: %w", err)
	}
	c.metricsHTTP = m
	return nil
}

// newMetricsServer binds addr and serves GET /metrics and /status.json
// from the renderers, within metricsLimits.
func newMetricsServer(addr string, metrics, statusJSON func() ([]byte, error)) (*metricsServer, error) {
	inner, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	if ip := inner.Addr().(*net.TCPAddr).IP; !ip.IsLoopback() {
		slog.Warn("--metrics-listen is not a loopback address: whoever reaches it reads /metrics and /status.json "+
			"(the source's path or bucket, consumers' names, rates); bind 127.0.0.1 or firewall the port",
			"addr", inner.Addr().String())
	}
	mux := http.NewServeMux()
	serve := func(contentType string, render func() ([]byte, error)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			data, err := render()
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			w.Header().Set("Content-Type", contentType)
			w.Write(data)
		}
	}
	mux.Handle("GET /metrics", serve("text/plain; version=0.0.4; charset=utf-8", metrics))
	mux.Handle("GET /status.json", serve("application/json", statusJSON))
	return &metricsServer{listener: newLimitListener(inner, metricsLimits.conns), server: &http.Server{
		Handler: mux, ReadHeaderTimeout: metricsLimits.header, ReadTimeout: metricsLimits.read,
		WriteTimeout: metricsLimits.write, IdleTimeout: metricsLimits.idle, MaxHeaderBytes: metricsLimits.headerBytes,
		ErrorLog: log.New(io.Discard, "", 0), // a client's bad request is its own business, not the log's
	}}, nil
}

// run serves until ctx ends; it returns once the server has stopped.
func (m *metricsServer) run(ctx context.Context) {
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		m.server.Serve(m.listener) // returns at Close
	}()
	<-ctx.Done()
	m.server.Close()
	<-stopped
}
