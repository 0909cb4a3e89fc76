package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
)

// metrics renders MOUNTPOINT/metrics in the Prometheus text format: what
// GET /metrics serves (the numbers of status, one series per consumer,
// and the Go runtime's and the process's), for tools to scrape.
func (d *daemon) metrics() ([]byte, error) {
	families, err := d.registry().Gather()
	var b bytes.Buffer
	for _, mf := range families {
		if _, werr := expfmt.MetricFamilyToText(&b, mf); werr != nil {
			return nil, werr
		}
	}
	return b.Bytes(), err
}

// registry is the mount's metrics: its own (snapshotCollector), Go's
// runtime and the process's, as users of Prometheus expect beside them.
func (d *daemon) registry() *prometheus.Registry {
	d.registryOnce.Do(func() {
		d.reg = prometheus.NewRegistry()
		d.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
			snapshotCollector{d.snapshot})
	})
	return d.reg
}

// snapshotCollector gives a mount's numbers as of one snapshot a
// scrape. Unchecked (it describes nothing ahead): which series there are
// depends on the mount (a cache, shards, a store, consumers).
type snapshotCollector struct{ snapshot func() *mountSnapshot }

func (snapshotCollector) Describe(chan<- *prometheus.Desc) {}

func (sc snapshotCollector) Collect(ch chan<- prometheus.Metric) {
	collectMetrics(sc.snapshot(), func(name, help string, kind prometheus.ValueType, v float64, consumer ...string) {
		var labels []string
		if len(consumer) > 0 {
			labels = []string{"consumer"}
		}
		ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(name, help, labels, nil), kind, v, consumer...)
	})
}

// collectMetrics gives each of a snapshot's numbers to emit.
func collectMetrics(s *mountSnapshot, emit func(name, help string, kind prometheus.ValueType, v float64, consumer ...string)) {
	snap := s.store
	gauge := func(name, help string, v float64) { emit(name, help, prometheus.GaugeValue, v) }
	counter := func(name, help string, v float64) { emit(name, help, prometheus.CounterValue, v) }
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
		gauge("tsock_shard_held_bytes", "Pieces of shards (tar or Parquet) held (--shard-memory and --shard-disk).", float64(sh.HeldBytes))
		gauge("tsock_shard_disk_used_bytes", "Shard disk in use (--shard-disk).", float64(sh.DiskMapped))
		counter("tsock_shard_piece_reads_total", "Pieces of shards read (a tar shard whole or a part of one, a Parquet row group), a request each.", float64(sh.Reads))
		counter("tsock_shard_read_ahead_wasted_total", "Pieces read ahead or kept for an epoch that began otherwise (a consumer joined mid-epoch).", float64(sh.Wasted))
	}
	if r := s.remote; r != nil {
		counter("tsock_remote_requests_total", "Requests to the object store, every attempt.", float64(r.requests))
		counter("tsock_remote_retries_total", "Object store requests tried again after a transient fault.", float64(r.retries))
		counter("tsock_remote_failures_total", "Object store requests that failed for good.", float64(r.failures))
		counter("tsock_remote_throttled_total", "Object store answers that asked to slow down (SlowDown): retried and paced.", float64(r.throttled))
		counter("tsock_remote_bytes_total", "Bytes read from the object store.", float64(r.bytes))
		counter("tsock_remote_resumed_total", "Object store reads that broke off and went on from the byte reached.", float64(r.resumed))
		counter("tsock_remote_slow_total", "Object store attempts cut for a body under the rate floor, gone on from the byte reached.", float64(r.slow))
		counter("tsock_remote_ranges_answered_whole_total", "Ranged GETs answered with the whole object (Range ignored): the range cut out of it.", float64(r.rangesWhole))
		gauge("tsock_remote_quota_waiting_requests", "Requests waiting for the one probing a store whose retry quota is spent.", float64(r.quotaWaiting))
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
		name  string
		kind  prometheus.ValueType
		help  string
		value func(i int) float64
	}{
		{"tsock_consumer_position", prometheus.GaugeValue, "The consumer's next batch number.", func(i int) float64 { return float64(snap.Consumers[i].Position) }},
		{"tsock_consumer_epoch", prometheus.GaugeValue, "Epoch of the last batch consumed (-1 before any).", func(i int) float64 { return float64(snap.Consumers[i].Epoch) }},
		{"tsock_consumer_lag_batches", prometheus.GaugeValue, "Published batches not yet consumed.", func(i int) float64 { return float64(snap.Consumers[i].Lag) }},
		{"tsock_consumer_lag_bytes", prometheus.GaugeValue, "Bytes of published batches not yet consumed.", func(i int) float64 { return float64(snap.Consumers[i].LagBytes) }},
		{"tsock_consumer_batches_read_total", prometheus.CounterValue, "Batches consumed.", func(i int) float64 { return float64(snap.Consumers[i].BatchesRead) }},
		{"tsock_consumer_samples_read_total", prometheus.CounterValue, "Samples consumed.", func(i int) float64 { return float64(snap.Consumers[i].SamplesRead) }},
		{"tsock_consumer_bytes_read_total", prometheus.CounterValue, "Bytes of batches consumed.", func(i int) float64 { return float64(snap.Consumers[i].BytesRead) }},
		{"tsock_consumer_open_batches", prometheus.GaugeValue, "Batches the consumer holds open.", func(i int) float64 { return float64(snap.Consumers[i].OpenBatches) }},
		{"tsock_consumer_wait_seconds_total", prometheus.CounterValue, "Time spent blocked waiting for a batch (exposed wait).", func(i int) float64 { return snap.Consumers[i].WaitTotal.Seconds() }},
		{"tsock_consumer_evicted", prometheus.GaugeValue, "1 if the consumer was evicted.", func(i int) float64 { return bool01(snap.Consumers[i].Evicted != "") }},
		{"tsock_consumer_done", prometheus.GaugeValue, "1 if the consumer read everything there will be.", func(i int) float64 { return bool01(snap.Consumers[i].Done) }},
	}
	for _, m := range perConsumer {
		for i, cs := range snap.Consumers {
			emit(m.name, m.help, m.kind, m.value(i), cs.Name)
		}
	}
}

func bool01(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// metricsServer serves /metrics (and /status.json) over HTTP for
// --metrics-listen: Prometheus scrapes a port, not a file in a mount.
// It is bounded, and answers its scrapers whatever other clients do:
// metricsLimits caps the connections it holds at once (a connection past
// the cap is answered 503 once its request's head is in, and closed,
// never queued behind the others), how long a request's headers may take (a second: a scraper
// sends them at once, a slow client is cut off early), a request and an
// idle keep-alive, and a request's headers' bytes, so that no client
// (nor a few hundred) can pin its memory or its slots for long.
type metricsServer struct {
	listener *limitListener
	server   *http.Server
}

// metricsLimits are the listener's bounds; a variable for tests.
var metricsLimits = struct {
	conns                     int
	header, read, write, idle time.Duration
	headerBytes               int
}{conns: 256, header: time.Second, read: 2 * time.Second, write: 5 * time.Second, idle: 10 * time.Second, headerBytes: 8 << 10}

// limitListener holds at most cap(slots) connections at once. One past
// that takes the slot of the longest-idle keep-alive, which is closed (a
// client holding idle keep-alives must not starve new scrapers: an idle
// connection costs its client nothing to open again); with none idle, it
// is answered 503 and closed (refuse), never queued.
type limitListener struct {
	net.Listener
	idleMu     sync.Mutex
	idle       map[*limitedConn]time.Time // keep-alives between requests, since when (ConnState)
	closedIdle atomic.Int64               // idle keep-alives closed to make room
	slots      chan struct{}
	refusing   chan struct{}  // refusals under way (each reads its request: see refuse)
	wg         sync.WaitGroup // the refusals' goroutines: run waits for them
	peak       atomic.Int64   // the most held at once, for tests
	refused    atomic.Int64   // connections answered 503 for want of a slot
}

// maxRefusing bounds the refusals under way; one past it is closed
// without an answer.
const maxRefusing = 512

func newLimitListener(l net.Listener, n int) *limitListener {
	return &limitListener{Listener: l, slots: make(chan struct{}, n), refusing: make(chan struct{}, maxRefusing), idle: map[*limitedConn]time.Time{}}
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			return l.held(c), nil
		default:
		}
		if l.closeIdle() {
			select {
			case l.slots <- struct{}{}: // the closed one's slot
				return l.held(c), nil
			default:
			}
		}
		l.refuse(c)
	}
}

// state follows each held connection's state (http.Server.ConnState):
// which are idle keep-alives, since when.
func (l *limitListener) state(c net.Conn, st http.ConnState) {
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	l.idleMu.Lock()
	defer l.idleMu.Unlock()
	if st == http.StateIdle {
		l.idle[lc] = time.Now()
	} else {
		delete(l.idle, lc)
	}
}

// closeIdle closes the longest-idle keep-alive, giving back its slot;
// false where none is idle.
func (l *limitListener) closeIdle() bool {
	l.idleMu.Lock()
	var oldest *limitedConn
	for c, since := range l.idle {
		if oldest == nil || since.Before(l.idle[oldest]) {
			oldest = c
		}
	}
	delete(l.idle, oldest)
	l.idleMu.Unlock()
	if oldest == nil {
		return false
	}
	l.closedIdle.Add(1)
	oldest.Close()
	return true
}

// busy is the answer to a connection past the cap.
const busy = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 36\r\nRetry-After: 1\r\nConnection: close\r\n\r\ntoo many connections: try again soon\n"

// refuse answers c 503 and closes it, from a goroutine of its own (the
// accept loop goes on at once), all within a second: the request's
// head is read first (an answer before it is one to a request not yet
// made, which an HTTP client drops with the connection), then the
// answer, then what the client still sends is read until it closes
// (closing with bytes unread would send a reset that can overtake the
// answer).
func (l *limitListener) refuse(c net.Conn) {
	l.refused.Add(1)
	select {
	case l.refusing <- struct{}{}:
	default:
		c.Close()
		return
	}
	l.wg.Go(func() {
		defer func() { <-l.refusing }()
		defer c.Close()
		c.SetDeadline(time.Now().Add(time.Second))
		if !readHead(c) {
			return
		}
		io.WriteString(c, busy)
		if tc, ok := c.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
		io.CopyBuffer(io.Discard, io.LimitReader(c, 64<<10), make([]byte, 512))
	})
}

// readHead reads a request's head, up to its blank line, at most
// metricsLimits.headerBytes; false if it never came.
func readHead(c net.Conn) bool {
	r := bufio.NewReaderSize(io.LimitReader(c, int64(metricsLimits.headerBytes)), 512)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return false
		}
		if line == "\r\n" || line == "\n" {
			return true
		}
	}
}

// held counts c as holding a slot until it closes.
func (l *limitListener) held(c net.Conn) net.Conn {
	held := int64(len(l.slots))
	for p := l.peak.Load(); held > p && !l.peak.CompareAndSwap(p, held); p = l.peak.Load() {
	}
	return &limitedConn{Conn: c, release: func() { <-l.slots }}
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
func (d *daemon) listenMetrics() error {
	if d.metricsListen == "" {
		return nil
	}
	m, err := newMetricsServer(d.metricsListen, promhttp.HandlerFor(d.registry(), promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}), d.statusJSON)
	if err != nil {
		return fmt.Errorf("--metrics-listen: %w", err)
	}
	d.metricsHTTP = m
	return nil
}

// newMetricsServer binds addr and serves GET /metrics from metrics and
// /status.json from its renderer, within metricsLimits.
func newMetricsServer(addr string, metrics http.Handler, statusJSON func() ([]byte, error)) (*metricsServer, error) {
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
	mux.Handle("GET /metrics", metrics)
	mux.Handle("GET /status.json", serve("application/json", statusJSON))
	listener := newLimitListener(inner, metricsLimits.conns)
	return &metricsServer{listener: listener, server: &http.Server{
		Handler: mux, ConnState: listener.state, ReadHeaderTimeout: metricsLimits.header, ReadTimeout: metricsLimits.read,
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
	m.listener.wg.Wait() // the refusals end within their second
}
